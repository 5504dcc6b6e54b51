"""The two ways A2A reads a task agree: `Fold` over the thread's events (what a stream sends)
and `snapshot` of its rows (what GetTask answers), after every step of a run, for approvals
(one, and two at once), a question, a wait for input in a sub-agent, a failure, a cancel."""

from typing import Any

import pytest
from google.protobuf import json_format

from a2a_server import mapping, reads
from agents import cancelling, decisions, replies, starting
from agents.engine import Engine
from agents.models import AgentDefinition, Event, Thread
from tests.a2a.conftest import AGENTS
from tests.conftest import operator


def folded(thread: Thread) -> mapping.Fold:
    fold = mapping.Fold(str(thread.pk))
    for event in Event.objects.filter(thread_id=thread.pk).order_by("id"):
        fold.apply(event)
    return fold


def agree(thread: Thread) -> int:
    """Assert the fold of the thread's events says what the snapshot of its rows says: the
    state, and while it waits, the same status message (words and data). Returns the state."""
    fold, snap = folded(thread), reads.snapshot(str(thread.pk))
    assert fold.state == snap.state
    if snap.state == mapping.INPUT_REQUIRED:
        expected = json_format.MessageToDict(snap.task.status.message)
        from_events = mapping.awaited_message(str(thread.pk), fold.awaited())
        assert json_format.MessageToDict(from_events) == expected
    return snap.state


class FoldTestCase:
    @pytest.fixture(autouse=True)
    def setup(self, users: dict[str, Any], load_agents: Any) -> None:
        self.reviewer = users["reviewer"]
        load_agents(AGENTS)
        self.engine = Engine()

    def start(self, agent: str, text: str = "go") -> Thread:
        thread = starting.start_thread(AgentDefinition.objects.get(name=agent), text, operator())
        assert agree(thread) == mapping.WORKING
        self.engine.advance(thread.pk)
        thread.refresh_from_db()
        return thread

    def step(self, thread: Thread) -> int:
        self.engine.advance(thread.pk)
        thread.refresh_from_db()
        return agree(thread)

    def test_an_approval_then_the_answer(self) -> None:
        thread = self.start("payer")
        assert agree(thread) == mapping.INPUT_REQUIRED
        [s] = thread.suspensions.all()
        decisions.decide(s, self.reviewer, {"approved": True})
        assert self.step(thread) == mapping.COMPLETED

    def test_two_approvals_at_once_decided_one_by_one(self) -> None:
        thread = self.start("mailer")
        first, second = thread.suspensions.order_by("created_at", "id")
        assert agree(thread) == mapping.INPUT_REQUIRED
        decisions.decide(first, self.reviewer, {"approved": True})
        # One still pending: the task waits for it alone, in both readings.
        assert agree(thread) == mapping.INPUT_REQUIRED
        decisions.decide(second, self.reviewer, {"approved": False, "reason": "not b"})
        assert self.step(thread) == mapping.COMPLETED

    def test_a_question_answered(self) -> None:
        thread = self.start("helpdesk")
        assert agree(thread) == mapping.INPUT_REQUIRED
        [s] = thread.suspensions.all()
        decisions.decide(s, self.reviewer, {"response": "staging"})
        assert self.step(thread) == mapping.COMPLETED

    def test_a_sub_agent_waits_for_input_then_the_run_completes(self) -> None:
        thread = self.start("desk")
        assert thread.status == Thread.Status.WAITING_INPUT
        assert agree(thread) == mapping.INPUT_REQUIRED
        replies.provide_input(thread.pk, operator(), text="A")
        thread.refresh_from_db()
        agree(thread)
        assert self.step(thread) == mapping.COMPLETED

    def test_a_cancel_while_an_approval_waits(self) -> None:
        thread = self.start("payer")
        cancelling.cancel_thread(thread.pk, operator())
        thread.refresh_from_db()
        assert agree(thread) == mapping.CANCELED
