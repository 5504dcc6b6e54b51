"""A stream's first answer, the task as it is, and SendMessage's answer are read under the rule
its updates follow (access.clearance): a token revoked, or its user deactivated, once the call
was authenticated gets no snapshot of the task but 401, as a socket opened with it is closed.

In process, through the handler the JSON-RPC endpoint calls (a2a_server.handler), so that the
revocation can be made to commit between the call's authentication and its first read."""

import asyncio
from typing import Any

import pytest
from a2a.server.context import ServerCallContext
from a2a.types import SendMessageRequest, SubscribeToTaskRequest
from django.contrib.auth.models import User

from a2a_server.access import Denied
from a2a_server.handler import GatewayRequestHandler
from access import tokens
from access.auth import bearer
from access.models import ApiToken, digest
from access.revocation import Credential
from agents import starting
from agents.models import AgentDefinition, Event
from tests.a2a.conftest import message
from tests.approvals.test_consumer import AGENTS, run

pytestmark = pytest.mark.django_db(transaction=True)

HOW = ["revoked", "deactivated"]


class RevokedSnapshotTestCase:
    @pytest.fixture(autouse=True)
    def setup(self, users: dict[str, Any], load_agents: Any) -> None:
        load_agents(AGENTS)
        self.user = users["operator"]  # starts runs and reads them
        self.token, self.raw = ApiToken.issue(self.user, "a2a")
        self.task = str(
            starting.start_thread(AgentDefinition.objects.get(name="payer"), "go", self.user).pk
        )

    def authenticated(self) -> ServerCallContext:
        """The call's context once its bearer token has passed (a2a_server.rpc.answer)."""
        caller = bearer(f"Bearer {self.raw}")
        assert caller.user is not None and caller.user.is_authenticated
        credential = Credential(caller.user.pk, token_digest=digest(self.raw))
        state = {"user": caller.user, "headers": {}, "credential": credential}
        return ServerCallContext(state=state)

    def revoke(self, how: str) -> None:
        """After the authentication, before the first read; a deactivation by a queryset
        update, which sends no signal and announces nothing."""
        if how == "revoked":
            tokens.revoke(self.token)
        else:
            User.objects.filter(pk=self.user.pk).update(is_active=False)

    def refused(self, first: Any) -> int:
        """The status `first` (a coroutine of the call's first answer) is refused with."""

        async def scenario() -> int:
            with pytest.raises(Denied) as refusal:
                await asyncio.wait_for(first, 30)
            return refusal.value.status

        return run(scenario)

    @pytest.mark.parametrize("how", HOW)
    def test_subscribe_to_task_sends_no_snapshot(self, how: str) -> None:
        context = self.authenticated()
        self.revoke(how)
        stream = GatewayRequestHandler().on_subscribe_to_task(
            SubscribeToTaskRequest(id=self.task), context
        )
        assert self.refused(anext(stream)) == 401

    @pytest.mark.parametrize("how", HOW)
    def test_send_streaming_message_sends_no_snapshot(self, how: str) -> None:
        context = self.authenticated()
        self.revoke(how)
        request = SendMessageRequest(message=message("pay", agent="payer"))
        stream = GatewayRequestHandler().on_message_send_stream(request, context)
        assert self.refused(anext(stream)) == 401

    @pytest.mark.parametrize("how", HOW)
    def test_send_message_answers_no_task(self, how: str) -> None:
        context = self.authenticated()
        self.revoke(how)
        request = SendMessageRequest(message=message("pay", agent="payer"))
        request.configuration.return_immediately = True
        answer = GatewayRequestHandler().on_message_send(request, context)
        assert self.refused(answer) == 401

    def test_a_valid_token_gets_its_snapshot(self) -> None:
        context = self.authenticated()
        stream = GatewayRequestHandler().on_subscribe_to_task(
            SubscribeToTaskRequest(id=self.task), context
        )

        async def scenario() -> Any:
            try:
                return await asyncio.wait_for(anext(stream), 30)
            finally:
                await stream.aclose()

        task = run(scenario)
        assert task.id == self.task
        assert Event.objects.filter(thread_id=self.task).exists()
