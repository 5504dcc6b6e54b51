"""A2A decisions on a `step_up` request (agents.policy): an approval is refused with a
PERMISSION_DENIED error that points to the request's page (a passkey is asked for there), and
a message cannot bring a proof of its own; a rejection needs no passkey."""

from typing import Any

import pytest

from agents.models import Suspension
from tests.a2a.conftest import Gateway
from tests.a2a.test_a2a_errors import error_of
from tests.a2a.test_a2a_policy import agent, decide, decided, start

pytestmark = [pytest.mark.worker]


class A2AStepUpTestCase:
    @pytest.fixture(autouse=True)
    def setup(self, gateway: Gateway, load_agents: Any) -> None:
        self.gateway = gateway
        load_agents(agent("vault", "{step_up: true}"))

    def test_an_approval_is_refused_towards_the_page_and_a_rejection_is_taken(self) -> None:
        task_id = start(self.gateway, "vault", who="operator")
        s = Suspension.objects.get(thread_id=task_id)
        error = error_of(decide(self.gateway, task_id, "reviewer", approved=True), 403)
        assert error["code"] == -31403
        assert error["data"][0]["reason"] == "PERMISSION_DENIED"
        assert "needs your passkey" in error["message"]
        assert f"/threads/{task_id}/#s-{s.pk}" in error["message"]
        # A proof sent along is not a field of a decision.
        r = decide(self.gateway, task_id, "reviewer", approved=True, step_up={"credential": "x"})
        assert "error" in r.json() and decided(task_id) == []
        r = decide(self.gateway, task_id, "reviewer", approved=False, reason="Not today.")
        assert r.status_code == 200 and "result" in r.json(), r.text
        [event] = decided(task_id)
        assert event.payload["status"] == "rejected" and "passkey" not in event.payload
