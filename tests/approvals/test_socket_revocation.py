"""An open socket closes (4401) within seconds once its token (deleted, revoked or expired), its
user or its session goes; a token without the read scope opens none."""

import asyncio
from datetime import timedelta
from typing import Any

import pytest
from channels.layers import get_channel_layer
from channels.testing import WebsocketCommunicator
from django.test import Client
from django.utils import timezone

from access import tokens
from access.models import ApiToken
from access.revocation import CHECK_INTERVAL
from tests.approvals.test_consumer import application, in_thread, run

# With a channel layer the revocation is announced and applies at once; without one, the next
# periodic check applies it.
WITHIN = 3.0 if get_channel_layer() is not None else CHECK_INTERVAL + 3.0


def closed_after(ws: WebsocketCommunicator, revoke: Any, within: float = WITHIN) -> int:
    """Open the socket, revoke its credentials from another thread, return its close code."""

    async def check() -> int:
        connected, _ = await ws.connect()
        assert connected
        await asyncio.sleep(0.5)  # the process's hub has joined the channel layer's group
        await in_thread(revoke)
        while True:
            output = await ws.receive_output(timeout=within)
            if output["type"] == "websocket.close":
                return output["code"]

    return run(check)


class SocketRevocationTestCase:
    @pytest.fixture(autouse=True)
    def setup(self, users: dict[str, Any], settings: Any, transactional_db: Any) -> None:
        settings.WEBSOCKET_ALLOWED_ORIGINS = ["http://localhost"]
        self.users = users
        self.browser = Client()
        self.browser.force_login(users["reviewer"])

    def session_socket(self) -> WebsocketCommunicator:
        cookie = self.browser.cookies["sessionid"].value
        headers = [(b"origin", b"http://localhost"), (b"cookie", f"sessionid={cookie}".encode())]
        return WebsocketCommunicator(application, "/ws/events/?after=0", headers=headers)

    def token_socket(self, raw: str) -> WebsocketCommunicator:
        headers = [(b"authorization", f"Bearer {raw}".encode())]
        return WebsocketCommunicator(application, "/ws/events/?after=0", headers=headers)

    def test_a_token_socket_closes_when_the_token_is_deleted(self) -> None:
        token, raw = ApiToken.issue(self.users["reviewer"], "client")
        assert closed_after(self.token_socket(raw), lambda: token.delete()) == 4401

    def test_a_token_socket_closes_when_the_token_is_revoked(self) -> None:
        token, raw = ApiToken.issue(self.users["reviewer"], "client")
        assert closed_after(self.token_socket(raw), lambda: tokens.revoke(token)) == 4401
        token.refresh_from_db()
        assert token.revoked_at is not None  # revoked, not deleted

    def test_a_token_socket_closes_when_the_token_expires(self) -> None:
        expires_at = timezone.now() + timedelta(seconds=2)
        _, raw = ApiToken.issue(self.users["reviewer"], "client", expires_at=expires_at)
        # Nothing announces an expiry: the periodic check finds it.
        within = 2 + CHECK_INTERVAL + 3.0
        assert closed_after(self.token_socket(raw), lambda: None, within) == 4401

    def test_a_token_without_the_read_scope_opens_no_socket(self) -> None:
        _, raw = ApiToken.issue(self.users["reviewer"], "client", ["runs", "decide"])

        async def check() -> Any:
            return await self.token_socket(raw).connect()

        assert run(check) == (False, 4403)

    def test_a_session_socket_closes_when_the_user_is_deactivated(self) -> None:
        user = self.users["reviewer"]

        def deactivate() -> None:
            user.is_active = False
            user.save(update_fields=["is_active"])

        assert closed_after(self.session_socket(), deactivate) == 4401

    def test_a_token_socket_closes_when_its_user_is_deactivated(self) -> None:
        user = self.users["reviewer"]
        _, raw = ApiToken.issue(user, "client")

        def deactivate() -> None:
            user.is_active = False
            user.save(update_fields=["is_active"])

        assert closed_after(self.token_socket(raw), deactivate) == 4401

    def test_a_session_socket_closes_when_the_user_logs_out(self) -> None:
        ws = self.session_socket()

        def log_out() -> None:
            assert self.browser.post("/logout/").status_code == 302

        assert closed_after(ws, log_out) == 4401

    def test_a_socket_whose_credentials_hold_stays_open(self) -> None:
        _, raw = ApiToken.issue(self.users["reviewer"], "client")
        ws, other = self.session_socket(), self.token_socket(raw)
        teammate = self.users["teammate"]

        async def check() -> None:
            assert (await ws.connect())[0] and (await other.connect())[0]
            # Someone else's revocation closes neither.
            await in_thread(lambda: ApiToken.issue(teammate, "theirs")[0].delete())
            await in_thread(lambda: Client().logout())
            assert await ws.receive_nothing(timeout=CHECK_INTERVAL + 1)
            assert await other.receive_nothing(timeout=0.1)
            await ws.disconnect()
            await other.disconnect()

        run(check)
