"""Socket messages are bounded: a huge event travels as a summary, whole over REST."""

import json
from typing import Any

import pytest
from channels.testing import WebsocketCommunicator

from agents import events
from agents.models import Event
from agents.wire import MESSAGE_LIMIT, socket_message
from approvals import consumers
from approvals.consumers import SEND_FAILED
from tests.approvals import state
from tests.approvals.test_consumer import in_thread, newest_id, run, socket

HUGE = 2 * 1024 * 1024


async def next_event(ws: WebsocketCommunicator) -> tuple[dict, int]:
    """The next event message and its size in bytes, skipping heartbeats and pongs."""
    while True:
        raw = await ws.receive_from(timeout=5)
        message = json.loads(raw)
        if "id" in message:
            return message, len(raw.encode())


class SocketBoundsTestCase:
    @pytest.fixture(autouse=True)
    def setup(self, users: dict[str, Any], api: Any, settings: Any, transactional_db: Any) -> None:
        settings.WEBSOCKET_ALLOWED_ORIGINS = ["http://localhost"]
        self.users = users
        self.api = api("reviewer")
        self.thread, _ = state.suspended(users["operator"])

    def write_huge_then_small(self) -> tuple[int, int]:
        huge = events.record(
            Event.Type.TOOL_RESULT,
            thread_id=self.thread.pk,
            payload={"tool": "lookup", "tool_use_id": "toolu_1", "content": "x" * HUGE},
        )
        small = events.record(
            Event.Type.AGENT_MESSAGE, thread_id=self.thread.pk, payload={"text": "after it"}
        )
        return huge.id, small.id

    def check(self, got: list[tuple[dict, int]], huge: int, small: int) -> None:
        (first, first_size), (second, _) = got
        assert first["id"] == huge and first["type"] == "TOOL_RESULT"
        assert first_size <= MESSAGE_LIMIT
        assert first["truncated"] is True and first["url"] == f"/api/events/{huge}"
        assert first["thread"] == str(self.thread.pk) and first["suspension"] is None
        assert first["payload"]["tool"] == "lookup"
        assert first["payload"]["content"].startswith("xxx")
        assert first["payload"]["content"].endswith("more characters]")
        assert second["id"] == small and second["payload"] == {"text": "after it"}
        assert "truncated" not in second

    def test_a_live_and_a_replaying_socket_get_a_summary_then_the_next_event(self) -> None:
        base = newest_id()
        live = socket(self.users["reviewer"], after=base)
        replaying = socket(self.users["reviewer"], after=base)  # connects after both are written

        async def check() -> tuple[int, int]:
            assert (await live.connect())[0]
            huge, small = await in_thread(self.write_huge_then_small)
            self.check([await next_event(live), await next_event(live)], huge, small)
            # A page rendered before both replays them from the table, bounded the same way.
            assert (await replaying.connect())[0]
            self.check([await next_event(replaying), await next_event(replaying)], huge, small)
            # Both sockets still stream.
            later = await in_thread(
                lambda: events.record(Event.Type.AGENT_MESSAGE, thread_id=self.thread.pk).id
            )
            assert (await next_event(live))[0]["id"] == later
            assert (await next_event(replaying))[0]["id"] == later
            await live.disconnect()
            await replaying.disconnect()
            return huge, small

        huge, small = run(check)
        whole = self.api.get(f"/api/events/{huge}")
        assert whole.status_code == 200
        assert whole.json()["payload"]["content"] == "x" * HUGE
        assert whole.json()["actor"] is None and "truncated" not in whole.json()
        assert self.api.get(f"/api/events/{small}").json()["payload"] == {"text": "after it"}

    def test_the_whole_event_needs_access_and_an_existing_id(self, api: Any) -> None:
        event = Event.objects.order_by("id").first()
        assert api(None).get(f"/api/events/{event.id}").status_code == 401
        assert api("outsider").get(f"/api/events/{event.id}").status_code == 403
        for missing in ("999999", "abc", "9" * 30):
            r = self.api.get(f"/api/events/{missing}")
            assert r.status_code == 404 and r.json()["error"] == "not_found"

    def test_a_socket_whose_send_fails_is_closed_with_a_clear_code(
        self, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        real_send = consumers.EventConsumer.send

        async def send(self: Any, text_data: Any = None, **kwargs: Any) -> None:
            if text_data and "refused by the server" in text_data:
                raise OSError("frame refused")
            await real_send(self, text_data=text_data, **kwargs)

        monkeypatch.setattr(consumers.EventConsumer, "send", send)
        ws = socket(self.users["reviewer"], after=newest_id())

        async def check() -> None:
            assert (await ws.connect())[0]
            await in_thread(
                lambda: events.record(
                    Event.Type.AGENT_MESSAGE,
                    thread_id=self.thread.pk,
                    payload={"text": "refused by the server"},
                )
            )
            closed = await ws.receive_output(timeout=5)
            assert closed == {"type": "websocket.close", "code": SEND_FAILED}

        run(check)


class SummaryTestCase:
    def message(self, payload: Any) -> dict:
        return {
            "id": 7,
            "type": "AGENT_SUSPENDED",
            "thread": "t",
            "suspension": "s",
            "payload": payload,
            "created_at": "2026-01-01T00:00:00+00:00",
            "actor": "alice",
        }

    def test_a_small_event_is_sent_whole(self) -> None:
        message = self.message({"id": "s", "input": {"a": 1}})
        assert json.loads(socket_message(message)) == message

    def test_a_summary_keeps_what_names_the_event_and_cuts_the_rest(self) -> None:
        payload = {
            "id": "s",
            "status": "pending",
            "tool": "transfer_funds",
            "input": {"note": "n" * 100_000, "rows": list(range(10_000)), "deep": [[[[[[1]]]]]]},
        }
        text = socket_message(self.message(payload))
        assert len(text.encode()) <= MESSAGE_LIMIT
        summary = json.loads(text)
        assert {k: summary[k] for k in ("id", "type", "thread", "suspension", "actor")} == {
            "id": 7,
            "type": "AGENT_SUSPENDED",
            "thread": "t",
            "suspension": "s",
            "actor": "alice",
        }
        assert summary["truncated"] is True and summary["url"] == "/api/events/7"
        p = summary["payload"]
        assert (p["id"], p["status"], p["tool"]) == ("s", "pending", "transfer_funds")
        assert p["input"]["note"].endswith("… [98000 more characters]")
        assert p["input"]["rows"][-1] == "… [9950 more items]"
        assert "nested value cut" in json.dumps(p["input"]["deep"], ensure_ascii=False)

    def test_even_thousands_of_keys_fit(self) -> None:
        payload = {f"key{n}": "v" * 50 for n in range(20_000)} | {"id": "s"}
        text = socket_message(self.message(payload))
        assert len(text.encode()) <= MESSAGE_LIMIT
        assert json.loads(text)["truncated"] is True
