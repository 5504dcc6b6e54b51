"""GET /api/requests/{id}?wait= answers under the rule a socket follows (access.clearance):
once the token is revoked, or its user deactivated, the long poll answers 401, never the
decision recorded after the revocation nor anything else it read.

In process, through the ASGI application gateway.asgi hands these polls to
(approvals.external_wait), so the revocation can be made while the poll waits."""

import asyncio
from typing import Any

import httpx
import pytest
from django.contrib.auth.models import User
from django.db import transaction

from access import tokens
from access.models import ApiToken
from agents.models import Event
from approvals import external_wait
from approvals.hub import hub
from tests.approvals.test_consumer import in_thread, run
from tests.external.test_requests_api import Caller, ask

pytestmark = pytest.mark.django_db(transaction=True)


class RevokedLongPollTestCase:
    @pytest.fixture(autouse=True)
    def setup(self, users: dict[str, Any]) -> None:
        self.users = users
        self.token, raw = ApiToken.issue(users["operator"], "agent", ["runs"])
        self.headers = {"Authorization": f"Bearer {raw}"}
        agent = Caller(users["operator"], "runs")
        made = agent.client.post("/api/requests", ask(), content_type="application/json")
        assert made.status_code == 201, made.content
        self.request = made.json()
        self.reviewer = Caller(users["reviewer"], "decide")

    def revoke(self, how: str) -> None:
        if how == "revoked":
            tokens.revoke(self.token)
        else:  # a queryset update: no signal, nothing announced
            User.objects.filter(pk=self.users["operator"].pk).update(is_active=False)

    def decide(self) -> None:
        body = self.request
        path = f"/api/threads/{body['thread']}/suspensions/{body['id']}/resume"
        assert self.reviewer.post(path, {"approved": True}).status_code == 202

    def poll(self, wait: int, meanwhile: Any) -> httpx.Response:
        """The long poll; once it waits (subscribed to the hub), `meanwhile` in a thread."""

        async def scenario() -> httpx.Response:
            transport = httpx.ASGITransport(app=external_wait.application)
            async with httpx.AsyncClient(transport=transport, base_url="http://gw") as client:
                url = f"/api/requests/{self.request['id']}"
                asked = asyncio.create_task(
                    client.get(url, params={"wait": wait}, headers=self.headers)
                )
                async with asyncio.timeout(30):
                    while not hub().subscribers and not asked.done():
                        await asyncio.sleep(0.01)
                await in_thread(meanwhile)
                async with asyncio.timeout(60):
                    return await asked

        return run(scenario)

    @pytest.mark.parametrize("how", ["revoked", "deactivated"])
    def test_a_decision_committed_with_the_revocation_is_not_answered(self, how: str) -> None:
        """The first read that sees the decision sees the revocation too: the poll must
        not answer it before its credential is checked again (it did: the check came only
        while the request was pending)."""

        def revoke_and_decide() -> None:
            with transaction.atomic():
                self.revoke(how)
                self.decide()

        answer = self.poll(30, revoke_and_decide)
        assert answer.status_code == 401, answer.text
        assert answer.json()["error"] == "unauthenticated"
        assert "approved" not in answer.text
        # Nor does the trail say the agent read the decision and went on.
        assert not Event.objects.filter(type=Event.Type.AGENT_RESUMED).exists()

    @pytest.mark.parametrize("how", ["revoked", "deactivated"])
    def test_a_decision_made_after_the_revocation_is_not_answered(self, how: str) -> None:
        def revoke_then_decide() -> None:
            self.revoke(how)
            self.decide()

        answer = self.poll(30, revoke_then_decide)
        assert answer.status_code == 401, answer.text
        assert "approved" not in answer.text

    def test_a_valid_token_reads_the_decision(self) -> None:
        answer = self.poll(30, self.decide)
        assert answer.status_code == 200, answer.text
        assert answer.json()["status"] == "approved" and answer.json()["resumed_at"]
        assert Event.objects.filter(type=Event.Type.AGENT_RESUMED).count() == 1
