"""Live text on the events socket: a thread page's socket gets its thread's LIVE_TEXT messages.

Runs against whatever the environment configures: with REDIS_URL the hub is woken by the
writer's wake-up through channels-redis; without it, the hub tails the LiveText table.
"""

import json
from typing import Any

import pytest
from channels.testing import WebsocketCommunicator
from django.db import transaction

from agents import events
from agents.models import AgentDefinition, Event, LiveText, StackFrame, Thread
from agents.streaming import LiveWriter
from agents.wire import MESSAGE_LIMIT
from approvals.hub import SAFETY_POLL, hub
from approvals.live import live_message
from tests.approvals.test_consumer import application, in_thread, run, session_cookie

# Well under SAFETY_POLL: with Redis a write arrives through the wake-up, not the slow poll.
PROMPT = SAFETY_POLL / 2


def watching(user: Any, thread: Any, after: int) -> WebsocketCommunicator:
    """A socket as the thread page opens it (thread=None: as the inbox does)."""
    query = f"after={after}" + (f"&thread={thread}" if thread else "")
    headers = [
        (b"origin", b"http://localhost"),
        (b"host", b"localhost"),
        (b"cookie", f"sessionid={session_cookie(user)}".encode()),
    ]
    return WebsocketCommunicator(application, f"/ws/events/?{query}", headers=headers)


async def next_live(ws: WebsocketCommunicator, timeout: float = 5) -> dict:
    """The next LIVE_TEXT message, skipping events and heartbeats."""
    while True:
        message = await ws.receive_json_from(timeout=timeout)
        if message.get("type") == "LIVE_TEXT":
            return message


async def no_live(ws: WebsocketCommunicator, timeout: float = 0.5) -> bool:
    """True when no LIVE_TEXT message comes within `timeout` (other messages are let pass)."""
    while not await ws.receive_nothing(timeout=timeout):
        if (await ws.receive_json_from()).get("type") == "LIVE_TEXT":
            return False
    return True


def newest_id() -> int:
    return Event.objects.order_by("-id").values_list("id", flat=True).first() or 0


def write(frame: StackFrame, *deltas: str) -> LiveWriter:
    """A worker's writer of `frame`, its deltas written at once (no coalescing)."""
    writer = LiveWriter(frame.thread_id, frame.pk, min_interval=0)
    for delta in deltas:
        writer.text(delta)
    return writer


class LiveTextSocketTestCase:
    @pytest.fixture(autouse=True)
    def setup(self, users: dict[str, Any], transactional_db: Any, settings: Any) -> None:
        settings.WEBSOCKET_ALLOWED_ORIGINS = ["http://localhost"]
        self.user = users["reviewer"]
        agent = AgentDefinition.objects.create(name="boss", agents_as_tools=["research"])
        self.thread = Thread.objects.create(agent=agent)
        self.other = Thread.objects.create(agent=agent)
        self.main = StackFrame.objects.create(
            thread=self.thread, agent_name="boss", model="scripted"
        )
        self.research = StackFrame.objects.create(
            thread=self.thread,
            parent=self.main,
            depth=1,
            agent_name="research",
            agent_type=StackFrame.Type.AGENT,
            instance=2,
            parent_tool_use_id="toolu_2",
            model="scripted",
        )
        StackFrame.objects.filter(pk=self.research.pk).update(lane=self.research.pk)
        self.elsewhere = StackFrame.objects.create(
            thread=self.other, agent_name="boss", model="scripted"
        )

    def test_a_page_opened_mid_stream_gets_the_text_so_far(self) -> None:
        write(self.research, "Looking into ", "the account").activity("calling lookup_account…")
        ws = watching(self.user, self.thread.pk, newest_id())

        async def check() -> None:
            assert (await ws.connect())[0]
            got = await next_live(ws)
            assert got == {
                "type": "LIVE_TEXT",
                "thread": str(self.thread.pk),
                "frame_id": self.research.pk,
                "frame": "agent:research[2]",
                "lane": self.research.pk,
                "seq": 3,
                "text": "Looking into the account",
                "activity": "calling lookup_account…",
                "cut": 0,
                "done": False,
            }
            await ws.disconnect()

        run(check)

    def test_updates_reach_the_sockets_watching_that_thread_only(self) -> None:
        base = newest_id()
        page = watching(self.user, self.thread.pk, base)
        other_page = watching(self.user, self.other.pk, base)
        inbox = watching(self.user, None, base)

        async def check() -> None:
            for ws in (page, other_page, inbox):
                assert (await ws.connect())[0]
            writer = await in_thread(lambda: write(self.main, "Hel"))
            first = await next_live(page, PROMPT)
            assert (first["frame_id"], first["frame"], first["lane"], first["text"]) == (
                self.main.pk,
                "boss",
                None,
                "Hel",
            )
            assert first["seq"] == 1
            await in_thread(lambda: writer.text("lo"))
            second = await next_live(page, PROMPT)
            assert (second["text"], second["seq"]) == ("Hello", 2)
            assert await no_live(other_page) and await no_live(inbox)
            for ws in (page, other_page, inbox):
                await ws.disconnect()

        run(check)

    def test_live_text_leaves_the_event_cursor_alone(self) -> None:
        base = newest_id()
        ws = watching(self.user, self.thread.pk, base)

        async def check() -> None:
            assert (await ws.connect())[0]
            await in_thread(lambda: write(self.main, "Thinking"))
            got = await next_live(ws, PROMPT)
            assert "id" not in got
            await ws.send_json_to({"type": "ping"})
            assert await ws.receive_json_from(timeout=5) == {"type": "pong", "cursor": base}
            await ws.disconnect()

        run(check)

    def test_a_closed_frame_ends_its_text(self) -> None:
        writer = write(self.main, "Draft")
        ws = watching(self.user, self.thread.pk, newest_id())

        async def check() -> None:
            assert (await ws.connect())[0]
            assert (await next_live(ws))["text"] == "Draft"
            await in_thread(writer.close)
            done = await next_live(ws, PROMPT)
            assert done["done"] is True and done["frame_id"] == self.main.pk
            assert (done["text"], done["activity"], done["seq"]) == ("", "", 1)
            # The next answer of the frame starts again from seq 1, after its end.
            await in_thread(lambda: write(self.main, "Next"))
            again = await next_live(ws, PROMPT)
            assert (again["text"], again["seq"], again["done"]) == ("Next", 1, False)
            await ws.disconnect()

        run(check)

    def test_a_line_ended_in_a_steps_transaction_rides_on_its_events_wake_up(
        self, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        writer = write(self.main, "Draft")
        ws = watching(self.user, self.thread.pk, newest_id())
        sent: list[str] = []
        send = events.broadcast

        def spy(message: dict) -> None:
            sent.append(message["type"])
            send(message)

        monkeypatch.setattr(events, "broadcast", spy)

        def step() -> None:  # as the engine ends a frame: its events, then its line
            with transaction.atomic():
                events.record("AGENT_MESSAGE", thread_id=self.thread.pk, payload={"text": "x"})
                writer.close(alone=False)

        async def check() -> None:
            assert (await ws.connect())[0]
            assert (await next_live(ws))["text"] == "Draft"
            await in_thread(step)
            done = await next_live(ws, PROMPT)
            assert done["done"] is True and done["frame_id"] == self.main.pk
            await ws.disconnect()

        run(check)
        # One message for the commit: the events' wake-up named the line's thread.
        assert sent == ["events.wake"]

    def test_a_row_made_again_between_two_reads_is_ended_first(self) -> None:
        writer = write(self.main, "Old answer")
        ws = watching(self.user, self.thread.pk, newest_id())

        async def check() -> None:
            assert (await ws.connect())[0]
            assert (await next_live(ws))["text"] == "Old answer"

            def again() -> None:
                writer.close()
                write(self.main, "New")

            await in_thread(again)  # quicker than the hub reads: it sees seq 1 again
            first, second = await next_live(ws, PROMPT), await next_live(ws, PROMPT)
            if not first["done"]:  # the hub did read in between: an end and a start anyway
                first, second = second, await next_live(ws, PROMPT)
            assert first["done"] is True
            assert (second["text"], second["seq"], second["done"]) == ("New", 1, False)
            await ws.disconnect()

        run(check)

    def test_a_second_page_gets_what_the_hub_holds_at_once(self) -> None:
        write(self.main, "Shared")
        base = newest_id()
        first, second = (
            watching(self.user, self.thread.pk, base),
            watching(self.user, self.thread.pk, base),
        )

        async def check() -> None:
            assert (await first.connect())[0]
            assert (await next_live(first))["text"] == "Shared"
            reads = hub().live_reads
            assert (await second.connect())[0]
            assert (await next_live(second, PROMPT))["text"] == "Shared"
            assert hub().live_reads - reads <= 1  # no read of its own, beyond the poll
            await first.disconnect()
            await second.disconnect()

        run(check)

    def test_nobody_watching_means_no_reads_of_live_text(self) -> None:
        write(self.main, "Unwatched")
        inbox = watching(self.user, None, newest_id())

        async def check() -> None:
            assert (await inbox.connect())[0]
            await in_thread(lambda: write(self.elsewhere, "Still unwatched"))
            assert await no_live(inbox, 0.5)
            assert hub().live_reads == 0
            await inbox.disconnect()

        run(check)

    def test_a_bad_thread_id_watches_nothing(self) -> None:
        write(self.main, "Hidden")
        ws = watching(self.user, "not-a-uuid", newest_id())

        async def check() -> None:
            assert (await ws.connect())[0]
            assert await no_live(ws)
            await ws.disconnect()

        run(check)

    def test_a_very_long_text_travels_as_its_tail(self) -> None:
        text = "".join(f"line {n} ünïcödé\n" for n in range(5000))
        write(self.main, text)
        ws = watching(self.user, self.thread.pk, newest_id())

        async def check() -> None:
            assert (await ws.connect())[0]
            got = await next_live(ws)
            assert got["cut"] > 0 and text.endswith(got["text"])
            assert got["cut"] + len(got["text"]) == len(text)
            await ws.disconnect()

        run(check)
        assert LiveText.objects.get(frame=self.main).text == text  # the row keeps it whole


class LiveMessageTestCase:
    def test_a_message_fits_the_limit_whatever_the_text(self) -> None:
        for text in ("a" * 100_000, "\u202e" * 50_000, "😀" * 40_000, '"\\' * 30_000):
            encoded = live_message("t", 1, "boss", None, 7, text, "calling x…")
            message = json.loads(encoded)
            assert len(encoded) <= MESSAGE_LIMIT
            assert text.endswith(message["text"]) and len(message["text"]) > 1000
            assert message["cut"] == len(text) - len(message["text"])

    def test_a_short_text_goes_whole(self) -> None:
        message = json.loads(live_message("t", 1, "boss", None, 7, "Hello", ""))
        assert (message["text"], message["cut"], message["done"]) == ("Hello", 0, False)
