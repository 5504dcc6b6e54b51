"""Policy over A2A (agents.policy): a decision sent as a data part is checked by the same
function as over REST, and a refusal is a JSON-RPC error (HTTP 403, PERMISSION_DENIED) that
says why; votes of a quorum leave the task waiting until the last one."""

from typing import Any

import pytest
from django.contrib.auth.models import Group

from agents.models import Event, Suspension, Thread
from tests.a2a.conftest import Gateway
from tests.a2a.test_a2a_errors import error_of, send_params
from tests.conftest import wait_for

pytestmark = [pytest.mark.worker]

AGENTS = """
agents:
  - name: {name}
    description: Pays an invoice once approved.
    model: scripted
    tools: [transfer_funds]
    tool_overrides:
      transfer_funds: {execution_mode: blocking, timeout: 600}
    policy: {policy}
    script:
      - text: Invoice 118 is due.
        tool_calls:
          - name: transfer_funds
            input: {from_account: ACC-1, to_account: ACC-2, amount: {amount}, currency: EUR}
      - text: Paid.
        if_error:
          text: Not paid.
"""


def agent(name: str, policy: str, amount: int = 200) -> str:
    return (
        AGENTS.replace("{name}", name).replace("{policy}", policy).replace("{amount}", str(amount))
    )


def start(gateway: Gateway, name: str, who: str, status: str = "suspended") -> str:
    params = send_params(text="pay")
    params["message"]["metadata"] = {"agent": name}
    r = gateway.rpc(
        "SendMessage", {**params, "configuration": {"returnImmediately": True}}, who=who
    )
    assert r.status_code == 200, r.text
    task_id = r.json()["result"]["task"]["id"]
    wait_for(
        lambda: Thread.objects.filter(pk=task_id, status=status).exists(),
        timeout=30,
        what=f"the task to be {status}",
    )
    return task_id


def decide(gateway: Gateway, task_id: str, who: str, **decision: Any) -> Any:
    s = Suspension.objects.get(thread_id=task_id)
    part = {"data": {"decision": {"suspension": str(s.pk), **decision}}}
    return gateway.rpc("SendMessage", send_params(task_id=task_id, **part), who=who)


def decided(task_id: str) -> list[Event]:
    return list(Event.objects.filter(thread_id=task_id, type="SUSPENSION_DECIDED"))


class A2APolicyTestCase:
    @pytest.fixture(autouse=True)
    def setup(self, gateway: Gateway, load_agents: Any) -> None:
        self.gateway = gateway
        Group.objects.get_or_create(name="finance")
        load_agents(
            agent("eyes", "{}")
            + agent("quorum", "{quorum: 2}").replace("agents:\n", "")
            + agent("finance", "{groups: [finance]}").replace("agents:\n", "")
            + agent("small", '{auto_approve: [{arg: amount, op: "<", value: 500}]}').replace(
                "agents:\n", ""
            )
            + agent("chatty", "{allow_respond: true}").replace("agents:\n", "")
            + agent("strict", "{allow_ignore: false}").replace("agents:\n", "")
        )

    def test_a_response_and_an_ignore_go_through_the_same_checks(self) -> None:
        # Allowed: the reviewer's answer decides, audited; the task goes on.
        task_id = start(self.gateway, "chatty", who="operator")
        r = decide(self.gateway, task_id, "reviewer", response="Pay after the credit note.")
        assert r.status_code == 200 and "result" in r.json(), r.text
        [event] = decided(task_id)
        assert event.payload["status"] == "responded" and event.actor.username == "alice"
        # Not allowed (allow_respond is off by default): refused, nothing written.
        task_id = start(self.gateway, "eyes", who="operator")
        error = error_of(decide(self.gateway, task_id, "reviewer", response="Later."), 403)
        assert error["code"] == -31403
        assert "does not let a reviewer answer the agent" in error["message"]
        assert decided(task_id) == []
        # An ignore: the task still waits, and the trail says who dismissed it.
        r = decide(self.gateway, task_id, "reviewer", ignore=True)
        assert r.status_code == 200 and "result" in r.json(), r.text
        s = Suspension.objects.get(thread_id=task_id)
        assert s.status == "pending" and s.ignored_by_name == "alice"
        ignored = Event.objects.get(suspension=s, type="SUSPENSION_IGNORED")
        assert ignored.actor.username == "alice"
        # A tool whose policy forbids it refuses the ignore.
        task_id = start(self.gateway, "strict", who="operator")
        error = error_of(decide(self.gateway, task_id, "reviewer", ignore=True), 403)
        assert "does not let a reviewer dismiss it" in error["message"]
        assert not Event.objects.filter(thread_id=task_id, type="SUSPENSION_IGNORED").exists()

    def test_who_started_the_task_may_not_decide_it(self) -> None:
        task_id = start(self.gateway, "eyes", who="reviewer")
        error = error_of(decide(self.gateway, task_id, "reviewer", approved=True), 403)
        assert error["code"] == -31403
        assert error["data"][0]["reason"] == "PERMISSION_DENIED"
        assert error["message"] == "You started this run; someone else must decide it (four eyes)."
        assert decided(task_id) == []
        r = decide(self.gateway, task_id, "teammate", approved=True)
        assert r.status_code == 200 and "result" in r.json(), r.text
        assert decided(task_id)[0].actor.username == "bob"

    def test_only_the_groups_named_may_decide(self) -> None:
        task_id = start(self.gateway, "finance", who="operator")
        error = error_of(decide(self.gateway, task_id, "reviewer", approved=True), 403)
        assert error["message"] == "Only group finance may decide this request."
        assert decided(task_id) == []

    def test_a_quorum_of_two_needs_two_people(self) -> None:
        task_id = start(self.gateway, "quorum", who="operator")
        r = decide(self.gateway, task_id, "reviewer", approved=True)
        assert r.status_code == 200, r.text
        # One vote: the task still waits for an approval.
        assert r.json()["result"]["task"]["status"]["state"] == "TASK_STATE_INPUT_REQUIRED"
        error = error_of(decide(self.gateway, task_id, "reviewer", approved=True), 403)
        assert error["message"] == "You already approved; waiting for 1 more approval."
        assert decided(task_id) == []
        edited = {"from_account": "ACC-1", "to_account": "ACC-2", "amount": 150, "currency": "EUR"}
        r = decide(self.gateway, task_id, "teammate", approved=True, modifiedArgs=edited)
        assert r.status_code == 200, r.text
        # bob's edit restarted the count: alice's approval was of other arguments.
        assert decided(task_id) == []
        voted = Event.objects.filter(thread_id=task_id, type="SUSPENSION_VOTED").last()
        assert voted.payload["approvals"] == 1 and voted.payload["approved_by"] == ["bob"]
        r = decide(self.gateway, task_id, "reviewer", approved=True)
        assert r.status_code == 200, r.text
        [event] = decided(task_id)
        assert event.payload["approved_by"] == ["bob", "alice"]
        assert event.payload["modifiedArgs"] == edited
        wait_for(
            lambda: Thread.objects.filter(pk=task_id, status="completed").exists(),
            timeout=30,
            what="the task to complete",
        )

    def test_any_rejection_rejects(self) -> None:
        task_id = start(self.gateway, "quorum", who="operator")
        assert decide(self.gateway, task_id, "reviewer", approved=True).status_code == 200
        r = decide(self.gateway, task_id, "teammate", approved=False, reason="wrong payee")
        assert r.status_code == 200, r.text
        [event] = decided(task_id)
        assert event.payload["status"] == "rejected" and event.payload["reason"] == "wrong payee"

    def test_an_auto_approve_rule_decides_with_no_one_asked(self) -> None:
        task_id = start(self.gateway, "small", who="operator", status="completed")
        [event] = decided(task_id)
        assert event.actor is None and event.payload["by"] == "policy"
        assert event.payload["rule"] == "amount < 500"
        s = Suspension.objects.get(thread_id=task_id)
        assert s.decided_by_name == "policy" and s.status == "approved"
