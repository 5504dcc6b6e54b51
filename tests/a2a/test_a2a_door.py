"""A2A decides through the one door (agents.door.take), as REST does: an approval with grant
terms makes the grant (listed by GET /api/grants, and the next identical call is approved by
it); a grant the policy bars, or a decision it refuses, is refused with the policy's rule in
the error's metadata, and nothing of the message is taken."""

from typing import Any

import pytest
from django.contrib.auth.models import Group

from agents.models import Event, Grant, Suspension, Thread
from tests.a2a.conftest import Gateway
from tests.a2a.test_a2a_errors import error_of
from tests.a2a.test_a2a_policy import agent, decide, decided, start
from tests.a2a.test_a2a_v03 import user_message

pytestmark = [pytest.mark.worker]

GRANT = {"seconds": 600, "max_uses": 5}


class A2ADoorTestCase:
    @pytest.fixture(autouse=True)
    def setup(self, gateway: Gateway, load_agents: Any) -> None:
        self.gateway = gateway
        Group.objects.get_or_create(name="finance")
        load_agents(
            agent("granted", "{}")
            + agent("counted", "{quorum: 2}").replace("agents:\n", "")
            + agent("finance", "{groups: [finance]}").replace("agents:\n", "")
        )

    def test_an_approval_with_a_grant_makes_it_and_the_next_identical_call_is_approved(
        self,
    ) -> None:
        task_id = start(self.gateway, "granted", who="operator")
        r = decide(self.gateway, task_id, "reviewer", approved=True, grant=GRANT)
        assert r.status_code == 200 and "result" in r.json(), r.text
        [event] = decided(task_id)
        assert event.payload["status"] == "approved" and event.actor.username == "alice"
        # The grant is made, as POST .../resume makes it, and listed where REST lists grants.
        with self.gateway.rest("reviewer") as rest:
            listed = rest.get("/api/grants", params={"state": "all"}).json()["grants"]
        assert [(g["agent"], g["tool"], g["max_uses"], g["granted_by"]) for g in listed] == [
            ("granted", "transfer_funds", 5, "alice")
        ]
        made = Event.objects.get(type=Event.Type.GRANT_CREATED)
        assert str(made.suspension_id) == str(event.suspension_id)
        # The next identical call waits for no one: the grant approves it.
        second = start(self.gateway, "granted", who="operator", status="completed")
        [by_grant] = decided(second)
        assert by_grant.payload["by"] == "grant"
        assert Grant.objects.get().uses == 1
        assert Event.objects.filter(thread_id=second, type=Event.Type.GRANT_USED).exists()

    def test_a_grant_the_policy_bars_is_refused_with_its_rule_and_nothing_taken(self) -> None:
        task_id = start(self.gateway, "counted", who="operator")
        r = decide(self.gateway, task_id, "reviewer", approved=True, grant=GRANT)
        error = error_of(r, 403)
        assert error["code"] == -31403
        assert error["message"] == "It needs 2 approvals; it cannot be granted ahead."
        assert error["data"][0]["metadata"] == {"rule": "quorum"}
        # Not even the vote was taken: the message is refused whole.
        s = Suspension.objects.get(thread_id=task_id)
        assert s.status == "pending" and not s.votes.exists()
        assert not Grant.objects.exists()

    def test_a_refusal_by_the_policy_names_its_rule(self) -> None:
        task_id = start(self.gateway, "finance", who="operator")
        error = error_of(decide(self.gateway, task_id, "reviewer", approved=True), 403)
        assert error["message"] == "Only group finance may decide this request."
        assert error["data"][0]["reason"] == "PERMISSION_DENIED"
        assert error["data"][0]["metadata"] == {"rule": "groups"}
        # Four eyes, in A2A 0.3's shape too.
        task_id = start(self.gateway, "granted", who="reviewer")
        s = Suspension.objects.get(thread_id=task_id)
        msg = user_message("approve", task_id=task_id)
        msg["parts"] = [
            {"kind": "data", "data": {"decision": {"suspension": str(s.pk), "approved": True}}}
        ]
        r = self.gateway.rpc("message/send", {"message": msg}, who="reviewer", version=None)
        error = error_of(r, 403)
        assert error["data"] == {"reason": "PERMISSION_DENIED", "rule": "four_eyes"}
        assert "(four eyes)" in error["message"]
        assert decided(task_id) == [] and Thread.objects.get(pk=task_id).status == "suspended"
