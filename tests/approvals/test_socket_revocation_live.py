"""Against a live daphne: a socket opened with a token closes (4401) within seconds once the
token is revoked, by command or in the admin, or expires; the token's next request is 401."""

import asyncio
import time
from collections.abc import Callable
from datetime import timedelta
from io import StringIO
from typing import Any

import httpx
import pytest
from django.core.management import call_command
from django.test import Client
from django.utils import timezone
from websockets.asyncio.client import connect
from websockets.exceptions import ConnectionClosed

from access.models import ApiToken
from access.revocation import CHECK_INTERVAL
from tests.e2e.conftest import daphne_server  # noqa: F401  (the live server, a session fixture)


def closes_after(server: Any, raw: str, revoke: Callable[[], Any], within: float) -> float:
    """Open /ws/events/ with the token, revoke it (in a thread: the ORM stays off the loop),
    and return how long the socket took to close with 4401."""

    async def scenario() -> float:
        url = server.url.replace("http", "ws") + "/ws/events/?after=0"
        headers = {"Authorization": f"Bearer {raw}"}
        async with connect(url, additional_headers=headers) as ws:
            await asyncio.sleep(0.5)  # the hub has joined the channel layer's group
            await asyncio.to_thread(revoke)
            started = time.monotonic()
            with pytest.raises(ConnectionClosed) as closed:
                async with asyncio.timeout(within):
                    while True:
                        await ws.recv()
            assert closed.value.rcvd is not None and closed.value.rcvd.code == 4401
            return time.monotonic() - started

    return asyncio.run(scenario())


@pytest.mark.django_db(transaction=True)
class LiveSocketRevocationTestCase:
    @pytest.fixture(autouse=True)
    def setup(self, daphne_server: Any, users: dict[str, Any]) -> None:  # noqa: F811 - the imported fixture, requested by name
        if daphne_server.proc is None or daphne_server.proc.poll() is not None:
            daphne_server.start()
        self.server = daphne_server
        self.users = users
        self.token, self.raw = ApiToken.issue(users["reviewer"], "live")

    def refused(self) -> httpx.Response:
        headers = {"Authorization": f"Bearer {self.raw}"}
        return httpx.get(f"{self.server.url}/api/suspensions", headers=headers, timeout=30)

    def test_revoking_by_command_closes_the_socket_within_seconds(self) -> None:
        def revoke() -> None:
            call_command("revoke_api_token", str(self.token.pk), stdout=StringIO())

        took = closes_after(self.server, self.raw, revoke, within=CHECK_INTERVAL + 5)
        assert took < CHECK_INTERVAL + 3
        r = self.refused()
        assert r.status_code == 401 and "revoked" in r.json()["detail"]

    def test_revoking_in_the_admin_closes_the_socket_within_seconds(self) -> None:
        def revoke() -> None:
            browser = Client()
            browser.force_login(self.users["admin"])
            r = browser.post(
                "/admin/access/apitoken/",
                {"action": "revoke", "_selected_action": [str(self.token.pk)]},
            )
            assert r.status_code == 302

        took = closes_after(self.server, self.raw, revoke, within=CHECK_INTERVAL + 5)
        assert took < CHECK_INTERVAL + 3
        assert self.refused().status_code == 401

    def test_an_expiring_token_closes_its_socket_within_seconds(self) -> None:
        ApiToken.objects.filter(pk=self.token.pk).update(
            expires_at=timezone.now() + timedelta(seconds=2)
        )
        took = closes_after(self.server, self.raw, lambda: None, within=2 + CHECK_INTERVAL + 5)
        assert took < 2 + CHECK_INTERVAL + 3
        r = self.refused()
        assert r.status_code == 401 and "expired" in r.json()["detail"]
