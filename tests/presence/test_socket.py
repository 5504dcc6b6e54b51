"""Claim and presence over the events socket: view, claim, release, lapse, leave.

Real sockets (channels' communicator through the same auth stack as gateway/asgi.py), a real
database and, with REDIS_URL, the real channel layer. Presence is no audit fact: nothing here
writes an Event.
"""

import asyncio
from collections.abc import Awaitable, Callable
from typing import Any

import pytest
from asgiref.sync import async_to_sync
from channels.db import database_sync_to_async
from channels.testing import WebsocketCommunicator
from django import db
from django.contrib.auth.models import Permission, User
from django.test import Client

from access.auth import WebSocketAuth
from agents import decisions, starting
from agents.engine import Engine
from agents.models import AgentDefinition, Event, Suspension
from approvals.consumers import EventConsumer
from presence.models import Claim, Viewer

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

application = WebSocketAuth(EventConsumer.as_asgi())


def run(coro: Callable[[], Awaitable[Any]]) -> Any:
    return async_to_sync(coro)()


def socket(user: Any) -> WebsocketCommunicator:
    client = Client()
    client.force_login(user)
    cookie = client.cookies["sessionid"].value
    headers = [
        (b"origin", b"http://localhost"),
        (b"host", b"localhost"),
        (b"cookie", f"sessionid={cookie}".encode()),
    ]
    after = Event.objects.order_by("-id").values_list("id", flat=True).first() or 0
    return WebsocketCommunicator(application, f"/ws/events/?after={after}", headers=headers)


def token_socket(raw: str) -> WebsocketCommunicator:
    headers = [(b"authorization", f"Bearer {raw}".encode())]
    return WebsocketCommunicator(application, "/ws/events/?after=0", headers=headers)


async def presence(ws: WebsocketCommunicator, timeout: float = 5, **want: Any) -> dict:
    """The next PRESENCE message (other messages skipped) whose keys equal `want`."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    while True:
        left = deadline - loop.time()
        if left <= 0:
            raise AssertionError(f"no PRESENCE with {want} within {timeout}s")
        message = await ws.receive_json_from(timeout=left)
        if message.get("type") == "PRESENCE" and all(message.get(k) == v for k, v in want.items()):
            return message


async def reply(ws: WebsocketCommunicator, kind: str, timeout: float = 5) -> dict:
    while True:
        message = await ws.receive_json_from(timeout=timeout)
        if message.get("type") == kind:
            return message


def claimer(message: dict) -> str | None:
    return message["claim"]["user"] if message["claim"] else None


def viewers(message: dict) -> list[str]:
    return [v["user"] for v in message["viewers"]]


class PresenceSocketTestCase:
    @pytest.fixture(autouse=True)
    def setup(
        self, users: dict[str, Any], load_agents: Any, transactional_db: Any, settings: Any
    ) -> None:
        settings.WEBSOCKET_ALLOWED_ORIGINS = ["http://localhost"]
        load_agents(AGENTS)
        self.alice = users["reviewer"]
        self.alice.first_name, self.alice.last_name = "Dana", "Reviewer"
        self.alice.save()
        self.bob = users["teammate"]
        self.users = users
        # The admin starts the run, so both reviewers may decide it (four eyes).
        agent = AgentDefinition.objects.get(name="payer")
        thread = starting.start_thread(agent, "go", users["admin"])
        Engine().advance(thread.pk)
        self.suspension = Suspension.objects.get()
        self.sid = str(self.suspension.pk)
        self.events = Event.objects.count()

    def no_events_written(self) -> None:
        assert Event.objects.count() == self.events

    def test_viewers_claim_and_release_appear_live_on_the_other_socket(self) -> None:
        a, b = socket(self.alice), socket(self.bob)
        sid = self.sid

        async def check() -> None:
            assert (await a.connect())[0] and (await b.connect())[0]
            await a.send_json_to({"type": "view", "suspensions": [sid]})
            first = await presence(a, suspension=sid)
            assert first["claim"] is None and first["viewers"] == []
            await b.send_json_to({"type": "view", "suspensions": [sid]})
            assert viewers(await presence(b, suspension=sid)) == ["Dana Reviewer"]
            assert viewers(await presence(a, suspension=sid)) == ["bob"]

            await a.send_json_to({"type": "claim", "suspension": sid})
            mine = await presence(a, suspension=sid)
            assert mine["claim"]["mine"] is True and claimer(mine) == "Dana Reviewer"
            theirs = await presence(b, suspension=sid)
            assert claimer(theirs) == "Dana Reviewer" and theirs["claim"]["mine"] is False
            assert theirs["claim"]["claimed_at"] < theirs["claim"]["expires_at"]

            await a.send_json_to({"type": "release", "suspension": sid})
            assert (await presence(b, suspension=sid))["claim"] is None
            await a.disconnect(timeout=5)
            await b.disconnect(timeout=5)

        run(check)
        assert not Claim.objects.exists()
        self.no_events_written()

    def test_a_page_opened_later_sees_the_claim_and_the_viewers_at_once(self) -> None:
        a, b = socket(self.alice), socket(self.bob)
        sid = self.sid

        async def check() -> None:
            assert (await a.connect())[0]
            await a.send_json_to({"type": "claim", "suspension": sid})
            await presence(a, suspension=sid)
            assert (await b.connect())[0]
            await b.send_json_to({"type": "view", "suspensions": [sid]})
            got = await presence(b, timeout=2, suspension=sid)
            assert claimer(got) == "Dana Reviewer" and viewers(got) == ["Dana Reviewer"]
            await a.disconnect(timeout=5)
            await b.disconnect(timeout=5)

        run(check)

    def test_closing_the_socket_releases_the_claim_and_ends_the_view(self) -> None:
        a, b = socket(self.alice), socket(self.bob)
        sid = self.sid

        async def check() -> None:
            assert (await a.connect())[0] and (await b.connect())[0]
            await a.send_json_to({"type": "claim", "suspension": sid})
            await b.send_json_to({"type": "view", "suspensions": [sid]})
            await presence(b, suspension=sid, viewers=[{"user": "Dana Reviewer"}])
            await a.disconnect(timeout=5)
            gone = await presence(b, suspension=sid, claim=None)
            assert gone["viewers"] == []
            await b.disconnect(timeout=5)

        run(check)
        assert not Claim.objects.exists() and not Viewer.objects.exists()
        self.no_events_written()

    def test_a_claim_lapses_after_claim_seconds_without_anyone_acting(self, settings: Any) -> None:
        settings.CLAIM_SECONDS = 1
        a, b = socket(self.alice), socket(self.bob)
        sid = self.sid

        async def check() -> None:
            assert (await a.connect())[0] and (await b.connect())[0]
            await b.send_json_to({"type": "view", "suspensions": [sid]})
            await presence(b, suspension=sid)
            await a.send_json_to({"type": "claim", "suspension": sid})
            held = await presence(b, suspension=sid, viewers=[{"user": "Dana Reviewer"}])
            assert claimer(held) == "Dana Reviewer"
            started = asyncio.get_running_loop().time()
            lapsed = await presence(b, timeout=4, suspension=sid, claim=None)
            assert asyncio.get_running_loop().time() - started >= 0.5
            assert viewers(lapsed) == ["Dana Reviewer"]  # still looking, no longer claiming
            await a.disconnect(timeout=5)
            await b.disconnect(timeout=5)

        run(check)

    def test_someone_else_cannot_take_a_held_claim_but_can_still_decide(self) -> None:
        a, b = socket(self.alice), socket(self.bob)
        sid, bob = self.sid, self.bob

        async def check() -> None:
            assert (await a.connect())[0] and (await b.connect())[0]
            await a.send_json_to({"type": "claim", "suspension": sid})
            await presence(a, suspension=sid)
            await b.send_json_to({"type": "claim", "suspension": sid})
            refused = await reply(b, "CLAIM_REFUSED")
            assert refused["error"] == "claimed" and refused["suspension"] == sid
            assert "Dana Reviewer is already reviewing" in refused["detail"]
            # The claim informs; it does not lock: bob decides, and the claim goes.
            s = await Suspension.objects.aget(pk=sid)

            def decide() -> Any:
                try:
                    return decisions.decide(s, bob, {"approved": True})
                finally:
                    db.connection.close()

            await asyncio.to_thread(decide)
            assert (await presence(a, suspension=sid))["claim"] is None
            await a.disconnect(timeout=5)
            await b.disconnect(timeout=5)

        run(check)
        assert Suspension.objects.get().status == Suspension.Status.APPROVED
        assert Event.objects.filter(type="SUSPENSION_DECIDED", actor_name="bob").count() == 1

    def test_who_may_not_decide_cannot_claim(self) -> None:
        watcher = User.objects.create_user("watcher")
        watcher.user_permissions.add(
            Permission.objects.get(content_type__app_label="agents", codename="view_thread")
        )
        w, starter = socket(watcher), socket(self.users["admin"])
        sid = self.sid

        async def check() -> None:
            assert (await w.connect())[0]
            await w.send_json_to({"type": "claim", "suspension": sid})
            refused = await reply(w, "CLAIM_REFUSED")
            assert refused["error"] == "forbidden"
            assert "You do not have permission to decide" in refused["detail"]
            await w.send_json_to({"type": "claim", "suspension": "not-an-id"})
            assert (await reply(w, "CLAIM_REFUSED"))["error"] == "invalid"
            await w.disconnect(timeout=5)
            # The run's starter may not decide it (four eyes), so may not claim it either.
            assert (await starter.connect())[0]
            await starter.send_json_to({"type": "claim", "suspension": sid})
            refused = await reply(starter, "CLAIM_REFUSED")
            assert refused["error"] == "forbidden" and "four eyes" in refused["detail"]
            await starter.disconnect(timeout=5)

        run(check)
        assert not Claim.objects.exists()
        self.no_events_written()

    def test_a_token_claims_only_with_the_decide_scope(self) -> None:
        from access.models import ApiToken

        _, reader = ApiToken.issue(self.bob, "reads", scopes=["read"])
        _, decider = ApiToken.issue(self.bob, "decides", scopes=["read", "decide"])
        r, d = token_socket(reader), token_socket(decider)
        sid = self.sid

        async def check() -> None:
            assert (await r.connect())[0] and (await d.connect())[0]
            await r.send_json_to({"type": "claim", "suspension": sid})
            refused = await reply(r, "CLAIM_REFUSED")
            assert refused["error"] == "forbidden" and "decide" in refused["detail"]
            await d.send_json_to({"type": "claim", "suspension": sid})
            got = await presence(d, suspension=sid)
            assert claimer(got) == "bob" and got["claim"]["mine"] is True
            await r.disconnect(timeout=5)
            await d.disconnect(timeout=5)

        run(check)

    def test_a_decided_request_cannot_be_claimed(self) -> None:
        decisions.decide(self.suspension, self.bob, {"approved": False, "reason": "no"})
        a = socket(self.alice)
        sid = self.sid

        async def check() -> None:
            assert (await a.connect())[0]
            await a.send_json_to({"type": "claim", "suspension": sid})
            assert (await reply(a, "CLAIM_REFUSED"))["error"] == "not_pending"
            await a.disconnect(timeout=5)

        run(check)
        assert not Claim.objects.exists()

    def test_views_are_bounded_and_only_pending_requests_count(self) -> None:
        a = socket(self.alice)
        sid = self.sid
        many = [sid] + [f"00000000-0000-0000-0000-{i:012d}" for i in range(200)]

        async def check() -> None:
            assert (await a.connect())[0]
            await a.send_json_to({"type": "view", "suspensions": many})
            await presence(a, suspension=sid)
            rows = await database_sync_to_async(Viewer.objects.count)()
            assert rows == 1
            await a.send_json_to({"type": "view", "suspensions": []})
            await asyncio.sleep(0.2)
            assert await database_sync_to_async(Viewer.objects.count)() == 0
            await a.disconnect(timeout=5)

        run(check)
