"""Once a revocation has committed, no event recorded after it reaches a socket opened with the
credential: the socket is closed with 4401 instead, whatever kind of revocation it was (token
revoked, expired or deleted, user deactivated, session logged out), with or without a channel
layer, and even when nothing announces the revocation (a queryset update sends no signal)."""

import time
from collections.abc import Callable
from datetime import timedelta
from typing import Any

import pytest
from channels.testing import WebsocketCommunicator
from django.contrib.auth.models import User
from django.test import Client
from django.utils import timezone

from access import tokens
from access.models import ApiToken
from agents import starting
from agents.models import AgentDefinition
from tests.approvals.test_consumer import AGENTS, application, in_thread, newest_id, run
from tests.conftest import operator

# How long a socket may take to close once an event follows the revocation: generous, so a
# loaded machine does not fail the test; a socket that closes later fails it.
CLOSE_WITHIN = 10.0


def start_run() -> None:
    """A run started by someone else, as on a reviewer's inbox: it records THREAD_STARTED."""
    starting.start_thread(AgentDefinition.objects.get(name="payer"), "go", operator())


def after_revocation(ws: WebsocketCommunicator, revoke: Callable[[], Any]) -> tuple[list, int]:
    """Open the socket, wait until it streams, revoke its credentials and then start a run
    (each in a thread of its own, committed, as another process would); return the events the
    socket received after the revocation and its close code."""

    async def scenario() -> tuple[list, int]:
        connected, _ = await ws.connect()
        assert connected
        await in_thread(start_run)  # an event before the revocation: the socket streams
        first = await ws.receive_json_from(timeout=CLOSE_WITHIN)
        assert first["type"] == "THREAD_STARTED"
        await in_thread(revoke)
        await in_thread(start_run)
        received = []
        while True:
            output = await ws.receive_output(timeout=CLOSE_WITHIN)
            if output["type"] == "websocket.close":
                return received, output["code"]
            received.append(output)

    return run(scenario)


class RevokedSocketEventsTestCase:
    @pytest.fixture(autouse=True)
    def setup(
        self, users: dict[str, Any], settings: Any, load_agents: Any, transactional_db: Any
    ) -> None:
        settings.WEBSOCKET_ALLOWED_ORIGINS = ["http://localhost"]
        load_agents(AGENTS)
        self.user = users["reviewer"]
        self.token, self.raw = ApiToken.issue(self.user, "laptop")
        self.browser = Client()
        self.browser.force_login(self.user)

    def token_socket(self) -> WebsocketCommunicator:
        headers = [(b"authorization", f"Bearer {self.raw}".encode())]
        return WebsocketCommunicator(application, f"/ws/events/?after={newest_id()}", headers)

    def session_socket(self) -> WebsocketCommunicator:
        cookie = self.browser.cookies["sessionid"].value
        headers = [(b"origin", b"http://localhost"), (b"cookie", f"sessionid={cookie}".encode())]
        return WebsocketCommunicator(application, f"/ws/events/?after={newest_id()}", headers)

    def deactivate(self) -> None:
        self.user.is_active = False
        self.user.save(update_fields=["is_active"])

    def test_it_sends_nothing_after_the_token_is_revoked_by_command(self) -> None:
        assert after_revocation(self.token_socket(), lambda: tokens.revoke(self.token)) == (
            [],
            4401,
        )

    def test_it_sends_nothing_after_the_token_is_deleted(self) -> None:
        assert after_revocation(self.token_socket(), self.token.delete) == ([], 4401)

    def test_it_sends_nothing_after_the_token_is_made_to_expire(self) -> None:
        def expire() -> None:
            ApiToken.objects.filter(pk=self.token.pk).update(expires_at=timezone.now())

        assert after_revocation(self.token_socket(), expire) == ([], 4401)

    def test_it_sends_nothing_after_the_token_expires_on_its_own(self) -> None:
        expires_at = timezone.now() + timedelta(seconds=2)
        ApiToken.objects.filter(pk=self.token.pk).update(expires_at=expires_at)

        def wait_for_expiry() -> None:
            time.sleep(max(0.0, (expires_at - timezone.now()).total_seconds()) + 0.1)

        assert after_revocation(self.token_socket(), wait_for_expiry) == ([], 4401)

    def test_it_sends_nothing_to_a_token_socket_after_its_user_is_deactivated(self) -> None:
        assert after_revocation(self.token_socket(), self.deactivate) == ([], 4401)

    def test_it_sends_nothing_to_a_session_socket_after_its_user_is_deactivated(self) -> None:
        assert after_revocation(self.session_socket(), self.deactivate) == ([], 4401)

    def test_it_sends_nothing_after_a_deactivation_that_sends_no_signal(self) -> None:
        def deactivate_quietly() -> None:
            User.objects.filter(pk=self.user.pk).update(is_active=False)

        assert after_revocation(self.token_socket(), deactivate_quietly) == ([], 4401)

    def test_it_sends_nothing_after_the_session_logs_out(self) -> None:
        def log_out() -> None:
            assert self.browser.post("/logout/").status_code == 302

        assert after_revocation(self.session_socket(), log_out) == ([], 4401)

    def test_it_keeps_sending_when_credentials_hold(self) -> None:
        ws = self.token_socket()

        async def scenario() -> list[str]:
            assert (await ws.connect())[0]
            # Someone else's revocation closes nothing and holds nothing back.
            await in_thread(lambda: ApiToken.issue(operator(), "theirs")[0].delete())
            await in_thread(start_run)
            message = await ws.receive_json_from(timeout=CLOSE_WITHIN)
            await ws.disconnect()
            return [message["type"]]

        assert run(scenario) == ["THREAD_STARTED"]
