"""The events socket: who may connect, replay after a cursor, streaming, and id gaps.

Runs against whatever the environment configures: with REDIS_URL the consumer is woken through
channels-redis; without it, it tails the Event table.
"""

import asyncio
import contextlib
import json
import re
import threading
from collections.abc import Awaitable, Callable
from datetime import timedelta
from typing import Any

import pytest
from asgiref.sync import async_to_sync
from channels.layers import get_channel_layer
from channels.testing import WebsocketCommunicator
from django import db
from django.db import transaction
from django.test import Client
from django.utils import timezone

from access.auth import WebSocketAuth
from access.models import ApiToken
from agents import decisions, events, starting
from agents.engine import Engine
from agents.models import AgentDefinition, Event, Suspension, Thread
from approvals import hub as hub_module
from approvals import settled
from approvals.consumers import INBOX_LIMIT, EventConsumer
from approvals.hub import SAFETY_POLL, hub
from approvals.settled import Batch
from tests.conftest import operator


class Rollback(Exception):
    """Raised to undo a transaction on purpose."""


AGENTS = """
agents:
  - name: payer
    model: scripted
    tools: [transfer_funds]
    script:
      - text: Paying.
        tool_calls:
          - {name: transfer_funds, input: {from_account: A-1, to_account: B-2, amount: 5}}
      - text: Paid.
"""

application = WebSocketAuth(EventConsumer.as_asgi())  # as gateway/asgi.py wraps the route


def session_cookie(user: Any) -> str:
    client = Client()
    client.force_login(user)
    return client.cookies["sessionid"].value


def socket(
    user: Any = None, after: int = 0, origin: str = "http://localhost"
) -> WebsocketCommunicator:
    headers = [(b"origin", origin.encode()), (b"host", b"localhost")]
    if user is not None:
        headers.append((b"cookie", f"sessionid={session_cookie(user)}".encode()))
    return WebsocketCommunicator(application, f"/ws/events/?after={after}", headers=headers)


@pytest.fixture(autouse=True)
def site_origin(settings: Any) -> None:
    """The page these sockets come from is the site (socket() sends this origin)."""
    settings.WEBSOCKET_ALLOWED_ORIGINS = ["http://localhost"]


def refused_with(headers: list[tuple[bytes, bytes]]) -> int:
    """The close code of a socket opened with these headers, which must not connect."""
    ws = WebsocketCommunicator(application, "/ws/events/?after=0", headers=headers)

    async def check() -> int:
        connected, code = await ws.connect()
        assert not connected
        return code

    return run(check)


def run(coro: Callable[[], Awaitable[Any]]) -> Any:
    return async_to_sync(coro)()


async def receive_events(ws: WebsocketCommunicator, count: int, timeout: float = 5) -> list[dict]:
    """The next `count` event messages, skipping heartbeats."""
    found: list[dict] = []
    while len(found) < count:
        message = await ws.receive_json_from(timeout=timeout)
        if "id" in message:
            found.append(message)
    return found


async def in_thread(work: Callable[[], Any]) -> Any:
    """Run blocking database work in another thread, as another process would, and close its
    connection so the test database can be dropped."""

    def call() -> Any:
        try:
            return work()
        finally:
            db.connection.close()

    return await asyncio.to_thread(call)


def start(user: Any) -> Thread:
    thread = starting.start_thread(AgentDefinition.objects.get(name="payer"), "go", operator())
    Engine().advance(thread.pk)
    return thread


def newest_id() -> int:
    return Event.objects.order_by("-id").values_list("id", flat=True).first() or 0


class ConsumerTestCase:
    @pytest.fixture(autouse=True)
    def setup(self, users: dict[str, Any], load_agents: Any, transactional_db: Any) -> None:
        load_agents(AGENTS)
        self.users = users

    def test_an_anonymous_socket_is_closed(self) -> None:
        ws = socket()

        async def check() -> None:
            connected, code = await ws.connect()
            assert not connected and code == 4401

        run(check)

    def test_a_user_without_access_is_closed(self) -> None:
        ws = socket(self.users["outsider"])

        async def check() -> None:
            connected, code = await ws.connect()
            assert not connected and code == 4403

        run(check)

    def test_a_foreign_origin_is_refused(self) -> None:
        ws = socket(self.users["reviewer"], origin="https://evil.example")

        async def check() -> None:
            connected, _ = await ws.connect()
            assert not connected

        run(check)

    def test_an_api_client_opens_it_with_a_bearer_token_and_no_origin(self) -> None:
        start(self.users["reviewer"])
        newest = newest_id()
        _, token = ApiToken.issue(self.users["reviewer"], "events client")
        headers = [(b"authorization", f"Bearer {token}".encode())]
        ws = WebsocketCommunicator(application, "/ws/events/?after=0", headers=headers)

        async def check() -> None:
            connected, _ = await ws.connect()
            assert connected
            got = await receive_events(ws, count)
            assert got[-1]["id"] == newest
            await ws.disconnect()

        count = Event.objects.count()
        run(check)

    @pytest.mark.parametrize("header", ["Bearer gw_not_a_token", "Basic dXNlcjpwYXNz"])
    def test_a_bad_authorization_header_is_closed_even_with_a_session(self, header: str) -> None:
        headers = [
            (b"origin", b"http://localhost"),
            (b"cookie", f"sessionid={session_cookie(self.users['reviewer'])}".encode()),
            (b"authorization", header.encode()),
        ]
        assert refused_with(headers) == 4401

    def test_a_token_without_access_is_closed(self) -> None:
        _, token = ApiToken.issue(self.users["outsider"], "nosy")
        assert refused_with([(b"authorization", f"Bearer {token}".encode())]) == 4403

    def test_it_replays_after_the_cursor_then_streams_live_events(self) -> None:
        start(self.users["reviewer"])
        cursor = Event.objects.filter(type="AGENT_MESSAGE").get().id
        expected = list(
            Event.objects.filter(id__gt=cursor).order_by("id").values_list("id", "type")
        )

        ws = socket(self.users["reviewer"], after=cursor)

        async def check() -> None:
            connected, _ = await ws.connect()
            assert connected
            replayed = await receive_events(ws, len(expected))
            assert [(m["id"], m["type"]) for m in replayed] == expected
            assert set(replayed[0]) == {
                "id",
                "type",
                "thread",
                "suspension",
                "payload",
                "created_at",
                "actor",
            }
            suspended = [m for m in replayed if m["type"] == "AGENT_SUSPENDED"][0]
            assert suspended["payload"]["tool"] == "transfer_funds"
            assert suspended["suspension"] == suspended["payload"]["id"]

            s = await Suspension.objects.aget()
            reviewer = self.users["reviewer"]
            await in_thread(
                lambda: decisions.decide(s, reviewer, {"approved": False, "reason": "no"})
            )
            [live] = await receive_events(ws, 1)
            assert live["type"] == "SUSPENSION_DECIDED" and live["actor"] == "alice"
            assert live["payload"]["reason"] == "no" and live["id"] > expected[-1][0]
            await ws.disconnect()

        run(check)

    def test_it_answers_a_ping_with_its_cursor(self) -> None:
        start(self.users["reviewer"])
        newest = newest_id()

        ws = socket(self.users["reviewer"], after=0)

        async def check() -> None:
            await ws.connect()
            await receive_events(ws, newest_count)
            await ws.send_json_to({"type": "ping"})
            assert await ws.receive_json_from(timeout=5) == {"type": "pong", "cursor": newest}
            await ws.disconnect()

        newest_count = Event.objects.count()
        run(check)

    @pytest.mark.skipif(
        db.connection.vendor != "postgresql",
        reason="SQLite gives ids under its write lock, so they always become visible in order",
    )
    def test_it_waits_for_an_id_still_being_written(self) -> None:
        # PostgreSQL can commit id 11 before id 10; a reader must not step over 10 too early.
        thread = start(self.users["reviewer"])
        base = newest_id()
        written, commit = threading.Event(), threading.Event()
        slow: list[int] = []

        def slow_writer() -> None:
            try:
                with transaction.atomic():
                    slow.append(Event.objects.create(type="AGENT_MESSAGE", thread=thread).id)
                    written.set()
                    commit.wait(10)
                    events.wake_after_commit()
            finally:
                db.connection.close()

        writer = threading.Thread(target=slow_writer)
        writer.start()
        assert written.wait(10)
        fast = events.record("AGENT_MESSAGE", thread_id=thread.pk).id
        assert fast > slow[0]
        ws = socket(self.users["reviewer"], after=base)

        async def check() -> None:
            await ws.connect()
            assert await ws.receive_nothing(timeout=0.5)
            commit.set()
            got = await receive_events(ws, 2)
            assert [m["id"] for m in got] == [slow[0], fast]
            await ws.disconnect()

        try:
            run(check)
        finally:
            commit.set()
            writer.join()

    @pytest.mark.skipif(
        db.connection.vendor != "postgresql",
        reason="SQLite gives ids under its write lock, so they always become visible in order",
    )
    def test_an_id_committed_between_the_read_and_the_gap_check_is_not_skipped(
        self, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        # The reader sees 11 without 10; 10's transaction commits right then. Deciding from a
        # check made after the read that nobody is writing would step over 10 for good.
        thread = start(self.users["reviewer"])
        base = newest_id()
        written, commit, committed = threading.Event(), threading.Event(), threading.Event()
        slow: list[int] = []

        def slow_writer() -> None:
            try:
                with transaction.atomic():
                    slow.append(Event.objects.create(type="AGENT_MESSAGE", thread=thread).id)
                    written.set()
                    commit.wait(10)
            finally:
                db.connection.close()
                committed.set()

        writer = threading.Thread(target=slow_writer)
        writer.start()
        assert written.wait(10)
        fast = events.record("AGENT_MESSAGE", thread_id=thread.pk).id
        real_read = settled.read_after

        def read_then_let_it_commit(after: int, limit: int = settled.BATCH) -> list:
            rows = real_read(after, limit)
            if [r.id for r in rows if r.id > base] == [fast]:
                commit.set()  # the slow transaction commits just after this read
                committed.wait(10)
            return rows

        monkeypatch.setattr(settled, "read_after", read_then_let_it_commit)
        ws = socket(self.users["reviewer"], after=base)

        async def check() -> None:
            await ws.connect()
            got = await receive_events(ws, 2, timeout=1.5)  # well before GAP_WAIT
            assert [m["id"] for m in got] == [slow[0], fast]
            await ws.disconnect()

        try:
            run(check)
        finally:
            commit.set()
            writer.join()

    def test_it_steps_over_the_id_of_an_event_never_written_at_once(self) -> None:
        thread = start(self.users["reviewer"])
        base = newest_id()
        if db.connection.vendor == "postgresql":
            # A rolled-back insert: the sequence keeps the id it gave (events are never
            # deleted there: a trigger refuses it).
            with contextlib.suppress(Rollback), transaction.atomic():
                Event.objects.create(type="AGENT_MESSAGE", thread=thread)
                raise Rollback
        else:
            # SQLite's AUTOINCREMENT takes back the id of a rolled-back insert, not of a
            # deleted row.
            Event.objects.create(type="AGENT_MESSAGE", thread=thread).delete()
        kept = Event.objects.create(type="AGENT_MESSAGE", thread=thread)
        assert kept.id == base + 2
        ws = socket(self.users["reviewer"], after=base)

        async def check() -> None:
            await ws.connect()
            # No open transaction could still hold id base + 1, so there is nothing to wait for.
            [got] = await receive_events(ws, 1, timeout=1)
            assert got["id"] == base + 2
            await ws.disconnect()

        run(check)

    def test_it_steps_over_a_gap_that_has_settled(self) -> None:
        thread = start(self.users["reviewer"])
        base = newest_id()
        Event.objects.create(
            id=base + 3,
            type="AGENT_MESSAGE",
            thread=thread,
            payload={},
            created_at=timezone.now() - timedelta(minutes=5),
        )

        ws = socket(self.users["reviewer"], after=base)

        async def check() -> None:
            await ws.connect()
            [got] = await receive_events(ws, 1)
            assert got["id"] == base + 3
            await ws.disconnect()

        run(check)

    def test_many_sockets_each_get_every_event_once_in_order_from_shared_reads(self) -> None:
        thread = start(self.users["reviewer"])
        base = newest_id()
        sockets = [socket(self.users["reviewer"], after=base) for _ in range(40)]

        async def check() -> None:
            for ws in sockets:
                assert (await ws.connect())[0]
            reads_before = hub().reads
            for _ in range(3):
                await in_thread(
                    lambda: events.record("AGENT_MESSAGE", thread_id=thread.pk, payload={})
                )
            got = [await receive_events(ws, 3) for ws in sockets]
            reads = hub().reads - reads_before
            expected = list(
                await in_thread(
                    lambda: list(
                        Event.objects.filter(id__gt=base)
                        .order_by("id")
                        .values_list("id", flat=True)
                    )
                )
            )
            assert all([m["id"] for m in messages] == expected for messages in got)
            for ws in sockets:
                assert await ws.receive_nothing(timeout=0.05)  # and nothing twice
            # The process read the table for all the sockets together, not once per socket.
            assert reads < len(sockets)
            for ws in sockets:
                await ws.disconnect()

        run(check)

    @pytest.mark.skipif(
        get_channel_layer() is None,
        reason="the embedded setup has no channel layer, so no wake-ups: its hub tails the "
        "table (the test above and the gap tests cover that path)",
    )
    def test_events_a_wake_up_carries_arrive_without_a_read_of_the_table(
        self, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        thread = start(self.users["reviewer"])
        base = newest_id()
        ws = socket(self.users["reviewer"], after=base)
        monkeypatch.setattr(hub_module, "SAFETY_POLL", 60)  # no poll reads during the test

        async def check() -> None:
            await ws.connect()
            await asyncio.sleep(0.3)  # the hub's first read, from before the events
            reads_before = hub().reads
            written = []
            for n in range(3):
                event = await in_thread(
                    lambda n=n: events.record(
                        "AGENT_MESSAGE", thread_id=thread.pk, payload={"n": n}
                    )
                )
                written.append(event.id)
            got = await receive_events(ws, 3)
            assert [m["id"] for m in got] == written
            assert [m["payload"] for m in got] == [{"n": 0}, {"n": 1}, {"n": 2}]
            assert hub().reads == reads_before  # each came with its wake-up
            await ws.disconnect()

        run(check)

    @pytest.mark.skipif(
        get_channel_layer() is None,
        reason="the embedded setup has no channel layer, so no wake-ups: its hub tails the "
        "table (the gap tests cover that path)",
    )
    def test_events_committed_out_of_order_arrive_in_order_without_a_read_of_the_table(
        self, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        # Two runs: the events of one run chain through its thread's row (agents.chain), so
        # the second would wait for the first to commit.
        thread, other = start(self.users["reviewer"]), start(self.users["reviewer"])
        base = newest_id()
        ws = socket(self.users["reviewer"], after=base)
        monkeypatch.setattr(hub_module, "SAFETY_POLL", 60)  # no poll reads during the test
        first_written, second_committed = threading.Event(), threading.Event()

        def first() -> int:
            with transaction.atomic():
                event = events.record("AGENT_MESSAGE", thread_id=thread.pk, payload={"n": 0})
                first_written.set()
                assert second_committed.wait(10)
            return event.id

        def second() -> int:
            assert first_written.wait(10)
            event = events.record("AGENT_MESSAGE", thread_id=other.pk, payload={"n": 1})
            second_committed.set()
            return event.id

        async def check() -> None:
            await ws.connect()
            await asyncio.sleep(0.3)  # the hub's first read, from before the events
            reads_before = hub().reads
            # The second id commits (and wakes the hub) before the first: the hub sees a
            # missing id, and the first's wake-up follows within milliseconds.
            written = await asyncio.gather(in_thread(first), in_thread(second))
            assert written == [base + 1, base + 2]
            got = await receive_events(ws, 2)
            assert [m["id"] for m in got] == written
            assert [m["payload"] for m in got] == [{"n": 0}, {"n": 1}]
            assert hub().reads == reads_before  # both came with their wake-ups
            await ws.disconnect()

        run(check)

    def test_an_event_written_without_a_wake_up_still_arrives(self) -> None:
        thread = start(self.users["reviewer"])
        base = newest_id()
        ws = socket(self.users["reviewer"], after=base)

        async def check() -> None:
            await ws.connect()
            # Written behind the wake-up's back, as if the channel layer had lost it.
            await in_thread(
                lambda: Event.objects.create(type="AGENT_MESSAGE", thread=thread, payload={})
            )
            [got] = await receive_events(ws, 1, timeout=SAFETY_POLL + 2)
            assert got["id"] == base + 1
            await ws.disconnect()

        run(check)

    def test_a_socket_whose_batches_overflowed_catches_up_from_the_table(self) -> None:
        thread = start(self.users["reviewer"])
        base = newest_id()
        ws = socket(self.users["reviewer"], after=base)

        async def check() -> None:
            await ws.connect()
            [consumer] = list(hub().subscribers)
            written = await in_thread(
                lambda: [
                    events.record("AGENT_MESSAGE", thread_id=thread.pk, payload={"n": n}).id
                    for n in range(5)
                ]
            )
            # A client too slow for its batches: more of them than a socket keeps waiting.
            for _ in range(INBOX_LIMIT + 5):
                consumer.deliver(Batch(prev=written[-1] + 100, rows=[]))
            got = await receive_events(ws, 5)
            assert [m["id"] for m in got] == written
            assert await ws.receive_nothing(timeout=0.3)
            await ws.disconnect()

        run(check)


class SnapshotTestCase:
    """State rebuilt from a page's snapshot plus the replayed events equals a fresh snapshot."""

    @pytest.fixture(autouse=True)
    def setup(self, users: dict[str, Any], load_agents: Any, transactional_db: Any) -> None:
        load_agents(AGENTS)
        self.users = users
        self.client = Client()
        self.client.force_login(users["reviewer"])

    def snapshot(self) -> tuple[int, dict[str, str]]:
        html = self.client.get("/").content.decode()
        data = json.loads(
            re.search(r'id="live-data" type="application/json">(.*?)</script>', html).group(1)
        )
        # Each card's opening tag: its id, then (among its other attributes) its status.
        cards = dict(re.findall(r'id="s-([0-9a-f-]+)"[^>]*? data-status="(\w+)"', html))
        return data["cursor"], cards

    def test_snapshot_plus_replay_equals_a_fresh_snapshot(self) -> None:
        first = start(self.users["reviewer"])
        cursor, cards = self.snapshot()
        assert list(cards.values()) == ["pending"]
        # After the page was rendered: one decision, one new suspension.
        decisions.decide(
            Suspension.objects.get(thread=first), self.users["teammate"], {"approved": True}
        )
        second = start(self.users["reviewer"])

        ws = socket(self.users["reviewer"], after=cursor)

        async def replay() -> list[dict]:
            await ws.connect()
            got = await receive_events(ws, await Event.objects.filter(id__gt=cursor).acount())
            await ws.disconnect()
            return got

        # Apply as static/js/inbox.js does: add new cards, mark decided ones.
        for message in run(replay):
            if message["type"] == "AGENT_SUSPENDED":
                cards.setdefault(message["suspension"], message["payload"]["status"])
            elif message["type"] == "SUSPENSION_DECIDED" and message["suspension"] in cards:
                cards[message["suspension"]] = message["payload"]["status"]
        pending = {k for k, v in cards.items() if v == "pending"}
        _, fresh = self.snapshot()
        assert pending == set(fresh) == {str(Suspension.objects.get(thread=second).id)}
