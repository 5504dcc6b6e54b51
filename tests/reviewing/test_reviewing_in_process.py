"""The reviewing model's step run in this process with a `scripted` reviewer (no worker, no
network): the demo's reviewer, the budget, the bounds, the request's own allow flags, and the
run's usage."""

import threading
from datetime import timedelta
from typing import Any

from django.db import connection
from django.test import Client
from django.utils import timezone

from agents import receipts, starting
from agents.engine import Engine
from agents.models import AgentDefinition, Event, ReviewCall, Suspension, Thread
from agents.reviewing import asking, verdicts
from agents.reviewing.setting import Setting
from approvals.api.payloads import thread_usage
from approvals.audit import timelines
from tests.conftest import ROOT, operator

APPROVE_SMALL = """{model: scripted, mode: decide, %(extra)s script: [
  {when: {arg: amount, op: "<=", value: 100}, decision: approve, reason: Small.},
  {decision: escalate, reason: Large.}]}"""


def agent(
    review: str, amounts: tuple[int, ...] = (42,), overrides: str = "", policy: str = ""
) -> str:
    calls = "\n".join(
        f"          - {{name: transfer_funds, input: {{from_account: A-1, to_account: B-{n}, "
        f"amount: {amount}}}}}"
        for n, amount in enumerate(amounts)
    )
    return f"""
agents:
  - name: clerk
    model: scripted
    tools: [transfer_funds]
    tool_overrides:
      transfer_funds: {{execution_mode: blocking, timeout: 600 {overrides}}}
    policy:
      review: {review}
      {policy}
    script:
      - text: Paying.
        tool_calls:
{calls}
      - text: Done.
        if_error: {{text: Stopped.}}
"""


def raised(name: str = "clerk", message: str = "Pay the claims") -> list[Suspension]:
    thread = starting.start_thread(AgentDefinition.objects.get(name=name), message, operator())
    Engine().advance(thread.pk)
    return list(Suspension.objects.filter(thread=thread).order_by("tool_input__amount"))


def reviewed(s: Suspension) -> Suspension:
    assert verdicts.review(s.pk) is True
    return Suspension.objects.get(pk=s.pk)


class DemoTestCase:
    def test_the_demo_reviewer_approves_the_small_claim_and_leaves_the_large_one(
        self, users: Any, load_agents: Any
    ) -> None:
        load_agents((ROOT / "demo" / "agents.yaml").read_text())
        small, large = raised("expenses")
        assert (
            small.review
            == large.review
            == {
                "model": "scripted",
                "mode": "decide",
                "outcome": "asked",
            }
        )

        small, large = reviewed(small), reviewed(large)

        assert (small.status, small.tier, small.decided_by_name) == (
            "approved",
            "model",
            "model:scripted",
        )
        assert receipts.decider_of(small.receipt)["kind"] == "model"
        assert large.status == "pending"
        assert (large.review["outcome"], large.review["recommendation"]) == (
            "escalated",
            "escalate",
        )
        # The large one's card says what the model said, in a box of its own.
        client = Client()
        client.force_login(users["reviewer"])
        html = client.get(f"/fragments/suspensions/{large.pk}/card").content.decode()
        assert 'aria-label="Reviewing model"' in html
        assert "Above 100 EUR, so a person checks it against the claim." in html
        # The audit trail names it as the decider, beside what it said.
        steps = {(x["label"], x["actor"]) for x in timelines([small])[small.pk]}
        assert ("Decided", "model:scripted") in steps
        assert ("Reviewed by a model", "") in steps
        # Its tokens count in the run's usage, beside the agent's.
        assert thread_usage(small.thread)["by_agent"]["model:scripted"]["input_tokens"] > 0

    def test_a_second_delivery_of_the_task_asks_nothing(self, users: Any, load_agents: Any) -> None:
        load_agents(agent(APPROVE_SMALL % {"extra": ""}))
        [s] = raised()
        reviewed(s)

        assert verdicts.review(s.pk) is False
        assert Event.objects.filter(suspension=s, type=Event.Type.SUSPENSION_REVIEWED).count() == 1

    def test_a_call_whose_worker_stopped_is_said_failed_when_its_task_comes_again(
        self, users: Any, load_agents: Any
    ) -> None:
        load_agents(agent(APPROVE_SMALL % {"extra": ""}))
        [s] = raised()
        setting = Setting.of(s.policy["review"])
        # Charged (the call began) by a worker that stopped before it recorded an answer.
        asking.charge(s, setting, timezone.now() - timedelta(minutes=5))

        s = reviewed(s)

        assert s.status == "pending"
        assert s.review["outcome"] == "failed"
        assert "stopped during the call" in s.review["error"]


class BudgetTestCase:
    def test_past_its_calls_a_minute_the_request_is_left_to_people(
        self, users: Any, load_agents: Any
    ) -> None:
        load_agents(agent(APPROVE_SMALL % {"extra": "per_minute: 1,"}, amounts=(42, 43)))
        first, second = raised()

        first, second = reviewed(first), reviewed(second)

        assert first.status == "approved"
        assert second.status == "pending"
        assert second.review["outcome"] == "failed"
        assert second.review["error"] == "budget spent: 1 calls a minute for agent clerk"


class BoundsTestCase:
    def test_an_irreversible_tool_is_not_sent_unless_the_setting_allows_it(
        self, users: Any, load_agents: Any
    ) -> None:
        load_agents(agent(APPROVE_SMALL % {"extra": ""}, overrides=", irreversible: true"))
        [kept_from_it] = raised()
        assert kept_from_it.review == {}

        load_agents(
            agent(
                APPROVE_SMALL % {"extra": "irreversible: true,"}, overrides=", irreversible: true"
            )
        )
        [allowed] = raised()
        assert reviewed(allowed).status == "approved"

    def test_an_approval_the_request_does_not_allow_is_refused_and_left_to_people(
        self, users: Any, load_agents: Any
    ) -> None:
        load_agents(agent(APPROVE_SMALL % {"extra": ""}, policy="allow_accept: false"))
        [s] = raised()

        s = reviewed(s)

        assert s.status == "pending"
        assert s.review["outcome"] == "escalated"
        assert "does not let a reviewer approve it as asked" in s.review["error"]
        assert not Event.objects.filter(suspension=s, type=Event.Type.SUSPENSION_DECIDED).exists()

    def test_a_request_a_rule_refused_is_never_reviewed(self, users: Any, load_agents: Any) -> None:
        refuse = 'auto_reject: [{arg: amount, op: ">", value: 10}]'
        load_agents(agent(APPROVE_SMALL % {"extra": ""}, policy=refuse))
        [s] = raised()

        assert (s.status, s.review) == ("rejected", {})
        assert verdicts.review(s.pk) is False
        assert Thread.objects.get(pk=s.thread_id).status != Thread.Status.SUSPENDED


class BudgetRaceTestCase:
    def test_two_workers_asking_at_once_cannot_both_spend_the_last_call(
        self, transactional_db: Any, users: Any, load_agents: Any
    ) -> None:
        load_agents(agent(APPROVE_SMALL % {"extra": "per_minute: 1,"}, amounts=(42, 43)))
        first, second = raised()
        setting = Setting.of(first.policy["review"])
        both = threading.Barrier(2)
        results: list[asking.Charge] = []

        def charge(s: Suspension) -> None:
            try:
                both.wait(timeout=10)
                results.append(asking.charge(s, setting, timezone.now()))
            finally:
                connection.close()  # this thread's own connection, as a second worker's

        threads = [threading.Thread(target=charge, args=(s,)) for s in (first, second)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(timeout=30)

        assert sorted(r.value for r in results) == ["charged", "spent"]
        assert ReviewCall.objects.count() == 1
