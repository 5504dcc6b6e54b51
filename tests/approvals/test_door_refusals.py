"""A decision the policy refuses comes back in each HTTP channel's words with the policy's
rule, through the one door (agents.door.take): resumeExecution and each item of POST
/api/decisions answer 403 `forbidden_by_policy` with `rule`; the step-up page, even with a
valid passkey, answers the same. Nothing is decided."""

from typing import Any

import pytest
from django.contrib.auth.models import Group

from agents.models import AgentDefinition, Event, Suspension
from tests.approvals import state
from tests.approvals.state import resume_url
from tests.approvals.test_step_up import Page, device

ONLY_FINANCE = "Only group finance may decide this request."


def with_policy(tool_policy: dict[str, Any]) -> None:
    state.agent("payer")
    AgentDefinition.objects.filter(name="payer").update(
        policy={"tools": {"transfer_funds": tool_policy}}
    )


def untouched(s: Suspension) -> bool:
    s.refresh_from_db()
    decided = Event.objects.filter(suspension=s, type=Event.Type.SUSPENSION_DECIDED)
    return s.status == "pending" and not decided.exists()


class RefusedByPolicyTestCase:
    @pytest.fixture(autouse=True)
    def setup(self, users: dict[str, Any], api: Any) -> None:
        Group.objects.get_or_create(name="finance")
        self.users = users
        self.api = api("reviewer")

    def pending(self, tool_policy: dict[str, Any], starter: str = "operator") -> Suspension:
        with_policy(tool_policy)
        _, [s] = state.suspended(self.users[starter])
        return s

    def test_resume_answers_403_with_the_rule(self) -> None:
        s = self.pending({"groups": ["finance"]})
        r = self.api.post(resume_url(s), {"approved": True})
        assert r.status_code == 403
        assert r.json() == {
            "error": "forbidden_by_policy",
            "detail": ONLY_FINANCE,
            "rule": "groups",
        }
        assert untouched(s)

    def test_each_item_of_a_batch_answers_403_with_the_rule(self) -> None:
        s = self.pending({"groups": ["finance"]})
        mine = self.pending({}, starter="reviewer")
        items = [{"suspension": str(x.pk), "decision": {"approved": False}} for x in (s, mine)]
        r = self.api.post("/api/decisions", {"decisions": items})
        assert r.status_code == 200, r.content
        found = [(x["status"], x["error"], x["rule"]) for x in r.json()["results"]]
        assert found == [
            (403, "forbidden_by_policy", "groups"),
            (403, "forbidden_by_policy", "four_eyes"),
        ]
        assert r.json()["results"][0]["detail"] == ONLY_FINANCE
        assert untouched(s) and untouched(mine)

    def test_the_step_up_page_answers_403_with_the_rule_after_a_valid_passkey(self) -> None:
        s = self.pending({"step_up": True, "groups": ["finance"]})
        page, key = Page(self.users["reviewer"]), device()
        assert page.register(key).status_code == 201
        r = page.approve(s, key.get(page.options(s).json()))
        assert r.status_code == 403, r.content
        assert r.json() == {
            "error": "forbidden_by_policy",
            "detail": ONLY_FINANCE,
            "rule": "groups",
        }
        assert untouched(s)
