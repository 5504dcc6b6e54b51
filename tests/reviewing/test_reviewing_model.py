"""A reviewing model through a real worker and the real `anthropic` SDK, answered by a local
stand-in of the Messages API: it decides in `decide` mode (through the one door: the receipt,
the event and the tier name it), fails closed to people on a timeout, a 500 or a malformed
answer, only recommends in `shadow` mode, never sees a `step_up` request, and is never shown
the agent's own words."""

import json
from typing import Any

import pytest

from agents import receipt_keys, receipts, starting
from agents.models import AgentDefinition, Event, ReviewCall, Suspension, Thread
from tests.conftest import operator, wait_for
from tests.reviewing.conftest import FIRST_MESSAGE, MODEL, PLEA, agent_file
from tests.reviewing.standin import MessagesStandIn

pytestmark = pytest.mark.worker

DECIDE = f"{{model: {MODEL}, mode: decide, may: [approve, reject], timeout: 2}}"


def run(name: str = "clerk") -> Thread:
    """Start the agent as the operator (four eyes: the operator decides nothing)."""
    return starting.start_thread(AgentDefinition.objects.get(name=name), FIRST_MESSAGE, operator())


def request_of(thread: Thread) -> Suspension:
    return wait_for(lambda: thread.suspensions.first(), timeout=30, what="the request")


def reviewed(thread: Thread) -> Suspension:
    """The thread's request once the model's answer (or failure) is recorded."""

    def done() -> Suspension | None:
        s = thread.suspensions.first()
        return s if s is not None and s.review.get("outcome") not in (None, "asked") else None

    return wait_for(done, timeout=30, what="the model's review")


class DecideModeTestCase:
    def test_the_model_approves_a_safe_call_and_the_receipt_names_it(
        self, worker: Any, users: Any, load_agents: Any, messages_api: MessagesStandIn
    ) -> None:
        load_agents(agent_file(DECIDE))
        messages_api.decide("approve", "A small payment between known accounts.")
        thread = run()

        s = reviewed(thread)
        assert (s.status, s.approved, s.tier) == ("approved", True, "model")
        assert s.decided_by_name == f"model:{MODEL}"
        assert s.review["outcome"] == "decided"
        assert s.review["recommendation"] == "approve"
        decider = receipts.decider_of(s.receipt)
        assert (decider["kind"], decider["name"]) == ("model", MODEL)
        assert len(decider["digest"]) == 64
        claims = receipts.verify(s.receipt, receipt_keys.jwks())
        assert claims["decision"]["approved"] is True
        [decided] = Event.objects.filter(suspension=s, type=Event.Type.SUSPENSION_DECIDED)
        assert decided.payload["decided_by"] == f"model:{MODEL}"
        assert decided.payload["model"]["reason"] == "A small payment between known accounts."
        # The approved call ran and the run went on, as after a person's approval.
        wait_for(
            lambda: Thread.objects.get(pk=thread.pk).status == Thread.Status.COMPLETED,
            timeout=30,
            what="the run to complete",
        )
        call = ReviewCall.objects.get(suspension=s)
        assert (call.input_tokens, call.output_tokens) == (640, 41)
        [request] = messages_api.requests
        assert request["tool_choice"] == {"type": "tool", "name": "decide"}
        assert request["model"] == MODEL

    def test_the_model_rejects_a_bad_call_and_the_receipt_names_it(
        self, worker: Any, users: Any, load_agents: Any, messages_api: MessagesStandIn
    ) -> None:
        load_agents(agent_file(DECIDE, amount=90000))
        messages_api.decide("reject", "Far above any earlier payment to this account.")
        thread = run()

        s = reviewed(thread)
        assert (s.status, s.approved, s.tier) == ("rejected", False, "model")
        assert s.reason == f"{MODEL}: Far above any earlier payment to this account."
        assert receipts.decider_of(s.receipt)["kind"] == "model"
        assert receipts.decider_of(s.receipt)["name"] == MODEL

    def test_an_answer_its_setting_may_not_take_is_left_to_people(
        self, worker: Any, users: Any, load_agents: Any, messages_api: MessagesStandIn
    ) -> None:
        load_agents(agent_file(f"{{model: {MODEL}, mode: decide, may: [approve]}}"))
        messages_api.decide("reject", "Looks wrong.")
        thread = run()

        s = reviewed(thread)
        assert s.status == "pending"
        assert (s.review["outcome"], s.review["recommendation"]) == ("escalated", "reject")


class FailsClosedTestCase:
    @pytest.mark.parametrize(
        ("answer", "error"),
        [
            ("fail", "the API answered 500"),
            ("malformed", "malformed answer"),
            ("slow", "timeout"),
        ],
    )
    def test_a_failed_call_leaves_the_request_to_people_and_says_why(
        self,
        worker: Any,
        users: Any,
        load_agents: Any,
        messages_api: MessagesStandIn,
        answer: str,
        error: str,
    ) -> None:
        load_agents(agent_file(f"{{model: {MODEL}, mode: decide, timeout: 1}}"))
        {"fail": lambda: messages_api.fail(500), "malformed": messages_api.malformed}.get(
            answer, lambda: messages_api.slow(3)
        )()
        thread = run()

        s = reviewed(thread)
        assert s.status == "pending"
        assert s.review["outcome"] == "failed"
        assert error in s.review["error"]
        assert s.tier == ""
        [event] = Event.objects.filter(suspension=s, type=Event.Type.SUSPENSION_REVIEWED)
        assert event.payload["outcome"] == "failed"
        assert not Event.objects.filter(suspension=s, type=Event.Type.SUSPENSION_DECIDED).exists()


class BoundsTestCase:
    def test_a_step_up_request_is_never_sent_to_the_model(
        self, worker: Any, users: Any, load_agents: Any, messages_api: MessagesStandIn
    ) -> None:
        load_agents(
            agent_file(DECIDE, policy="tools: {transfer_funds: {step_up: true}}", name="vault")
            + agent_file(DECIDE).split("agents:\n", 1)[1]
        )
        messages_api.decide("approve", "Fine.")
        guarded = request_of(run("vault"))
        # The next agent's request is reviewed; the step_up one, raised first, never was.
        plain = reviewed(run("clerk"))

        guarded.refresh_from_db()
        assert guarded.status == "pending"
        assert guarded.review == {}
        assert not ReviewCall.objects.filter(suspension=guarded).exists()
        assert plain.review["outcome"] == "decided"
        assert len(messages_api.requests) == 1
        assert "vault" not in messages_api.bodies[0].decode()


class BlindToTheAgentTestCase:
    def test_the_model_is_shown_the_facts_and_none_of_the_agents_words(
        self, worker: Any, users: Any, load_agents: Any, messages_api: MessagesStandIn
    ) -> None:
        load_agents(agent_file(DECIDE))
        messages_api.decide("escalate", "Unsure.")
        thread = run()

        s = reviewed(thread)
        assert s.prompt.endswith(PLEA)  # the agent did plead, on its request
        [body] = messages_api.bodies
        sent = body.decode()
        assert "TRUST-ME-7731" not in sent
        assert "auditor" not in sent
        # What it is shown instead: the facts the gateway derived.
        prompt = messages_api.requests[0]["messages"][0]["content"]
        facts = json.loads(prompt.split("<request_data>", 1)[1].split("</request_data>")[0])
        assert facts["tool"] == "transfer_funds"
        assert facts["first_user_message"] == FIRST_MESSAGE
        assert json.loads(facts["arguments"])["amount"] == 120
        assert facts["risk"] == "high"
        assert s.status == "pending"
        assert s.review["outcome"] == "escalated"


class ShadowModeTestCase:
    def test_shadow_mode_recommends_and_changes_no_outcome(
        self, worker: Any, users: Any, load_agents: Any, messages_api: MessagesStandIn
    ) -> None:
        load_agents(agent_file(f"{{model: {MODEL}, mode: shadow}}"))
        messages_api.decide("approve", "Looks routine.")
        thread = run()

        s = reviewed(thread)
        assert (s.status, s.tier, s.decided_by_name) == ("pending", "", "")
        assert s.review == {
            "model": MODEL,
            "mode": "shadow",
            "recommendation": "approve",
            "reason": "Looks routine.",
            "outcome": "recommended",
        }
        assert Thread.objects.get(pk=thread.pk).status == Thread.Status.SUSPENDED
