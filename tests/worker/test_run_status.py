"""A run whose agent instances wait for approval says so (issue 31, item 1): `suspended` once
no frame or instance works and a request waits, `running` again when a decision lets an
instance go on, through a real worker on either setup."""

from typing import Any

import pytest

from agents.models import Event, StackFrame, Thread
from tests.conftest import operator_of, wait_for
from tests.worker.test_agents_as_tools import decide, events, pending, wait_status

pytestmark = pytest.mark.worker

AGENTS = """
agents:
  - name: slow
    description: Takes two seconds.
    model: scripted
    tools: [pause]
    script:
      - tool_calls:
          - {name: pause, input: {seconds: 2}}
      - text: Slept.
  - name: asker
    description: Asks a reviewer first.
    model: scripted
    tools: [displayConfirmation]
    script:
      - tool_calls:
          - {name: displayConfirmation, input: {action: Publish the report}}
      - text: Published.
        if_error:
          error: The reviewer said no.
  - name: split
    model: scripted
    agents_as_tools: [slow, asker]
    script:
      - tool_calls:
          - {name: agent__slow, input: {text: quick one}}
          - {name: agent__asker, input: {text: weekly report}}
      - text: Batch over.
  - name: middle
    description: Calls the asker in turn.
    model: scripted
    agents_as_tools: [asker]
    script:
      - tool_calls:
          - {name: agent__asker, input: {text: nested}}
      - text: Middle done.
  - name: nested
    model: scripted
    agents_as_tools: [slow, middle]
    script:
      - tool_calls:
          - {name: agent__slow, input: {text: quick one}}
          - {name: agent__middle, input: {text: go deeper}}
      - text: Nested over.
  - name: twice
    description: Asks twice.
    model: scripted
    tools: [displayConfirmation]
    script:
      - tool_calls:
          - {name: displayConfirmation, input: {action: First step}}
      - tool_calls:
          - {name: displayConfirmation, input: {action: Second step}}
      - text: Both steps done.
  - name: asks_twice
    model: scripted
    agents_as_tools: [slow, twice]
    script:
      - tool_calls:
          - {name: agent__slow, input: {text: quick one}}
          - {name: agent__twice, input: {text: two steps}}
      - text: All over.
  - name: hasty_asker
    description: Asks a reviewer, for four seconds.
    model: scripted
    tools: [displayConfirmation]
    tool_overrides:
      displayConfirmation: {timeout: 4, on_timeout: reject}
    script:
      - tool_calls:
          - {name: displayConfirmation, input: {action: Publish now}}
      - text: Published.
        if_error:
          error: Nobody answered.
  - name: hasty_split
    model: scripted
    agents_as_tools: [slow, hasty_asker]
    script:
      - tool_calls:
          - {name: agent__slow, input: {text: quick one}}
          - {name: agent__hasty_asker, input: {text: now}}
      - text: Batch over.
"""


@pytest.fixture(autouse=True)
def agents(load_agents: Any) -> None:
    load_agents(AGENTS)


def start(api: Any, agent: str) -> str:
    r = operator_of(api).post("/api/threads", {"agent": agent, "message": "go"})
    assert r.status_code == 201, r.content
    return r.json()["id"]


def slow_finished(tid: str) -> Event:
    return wait_for(
        lambda: next(
            (e for e in events(tid, "INSTANCE_FINISHED") if e.payload["agent"] == "slow"), None
        ),
        what="the slow instance to finish",
    )


def api_status(reviewer: Any, tid: str) -> str:
    r = reviewer.get(f"/api/threads/{tid}")
    assert r.status_code == 200, r.content
    return r.json()["status"]


def listed(reviewer: Any, status: str) -> list[str]:
    r = reviewer.get("/api/threads", status=status)
    assert r.status_code == 200, r.content
    return [t["id"] for t in r.json()["results"]]


def task_state(tid: str) -> str:
    from a2a.types import TaskState

    from a2a_server.reads import snapshot

    return TaskState.Name(snapshot(tid).state)


class RunStatusTestCase:
    def test_a_run_whose_only_waiting_instance_asks_is_suspended(
        self, worker: Any, api: Any
    ) -> None:
        reviewer = api("reviewer")
        tid = start(reviewer, "split")
        s = wait_for(lambda: (pending(tid) or [None])[0], what="the instance's suspension")
        done = slow_finished(tid)
        # No frame works any more (the parent waits for its instances, asker[2] for a person).
        wait_status(tid, "suspended")
        assert api_status(reviewer, tid) == "suspended"
        assert tid in listed(reviewer, "suspended")
        assert tid not in listed(reviewer, "running")
        (suspended,) = events(tid, "THREAD_SUSPENDED")
        assert suspended.id > done.id
        assert suspended.payload["status"] == "suspended"
        assert suspended.payload["suspensions"] == [str(s.id)]
        assert task_state(tid) == "TASK_STATE_INPUT_REQUIRED"
        # The decision lets the instance go on: the run is running again, then completes.
        decide(reviewer, s, {"approved": True})
        wait_status(tid, "completed")
        (resumed,) = events(tid, "THREAD_RESUMED")
        decided = events(tid, "SUSPENSION_DECIDED")[0]
        assert decided.id < resumed.id
        assert resumed.payload["status"] == "running"
        assert Thread.objects.get(pk=tid).result == "Batch over."
        assert task_state(tid) == "TASK_STATE_COMPLETED"

    def test_an_instance_that_asks_again_suspends_the_run_again(
        self, worker: Any, api: Any
    ) -> None:
        reviewer = api("reviewer")
        tid = start(reviewer, "asks_twice")
        first = wait_for(lambda: (pending(tid) or [None])[0], what="the first question")
        slow_finished(tid)
        wait_status(tid, "suspended")
        decide(reviewer, first, {"approved": True})
        second = wait_for(
            lambda: next((s for s in pending(tid) if s.pk != first.pk), None),
            what="the second question",
        )
        wait_status(tid, "suspended")
        assert [
            e.type
            for e in Event.objects.filter(
                thread_id=tid, type__in=["THREAD_SUSPENDED", "THREAD_RESUMED"]
            ).order_by("id")
        ] == ["THREAD_SUSPENDED", "THREAD_RESUMED", "THREAD_SUSPENDED"]
        assert events(tid, "THREAD_SUSPENDED")[1].payload["suspensions"] == [str(second.id)]
        decide(reviewer, second, {"approved": True})
        wait_status(tid, "completed")
        assert Thread.objects.get(pk=tid).result == "All over."

    def test_a_nested_instance_that_asks_suspends_the_run(self, worker: Any, api: Any) -> None:
        reviewer = api("reviewer")
        tid = start(reviewer, "nested")
        s = wait_for(lambda: (pending(tid) or [None])[0], what="the nested instance's question")
        assert s.lineage == "main → agent:middle[2] → agent:asker[1]"
        slow_finished(tid)
        wait_status(tid, "suspended")
        assert api_status(reviewer, tid) == "suspended"
        decide(reviewer, s, {"approved": True})
        wait_status(tid, "completed")
        assert len(events(tid, "THREAD_RESUMED")) == 1
        assert Thread.objects.get(pk=tid).result == "Nested over."

    def test_a_rejection_at_the_deadline_lets_the_run_go_on(self, worker: Any, api: Any) -> None:
        tid = start(api("reviewer"), "hasty_split")
        wait_status(tid, "suspended")
        wait_status(tid, "completed", timeout=30)
        (timeout,) = events(tid, "SUSPENSION_TIMEOUT")
        (resumed,) = events(tid, "THREAD_RESUMED")
        assert timeout.id < resumed.id
        assert Thread.objects.get(pk=tid).result == "Batch over."

    def test_a_suspended_run_can_be_cancelled(self, worker: Any, api: Any) -> None:
        reviewer = api("reviewer")
        tid = start(reviewer, "split")
        wait_for(lambda: pending(tid), what="the instance's suspension")
        slow_finished(tid)
        wait_status(tid, "suspended")
        r = reviewer.post(f"/api/threads/{tid}/cancel")
        assert r.status_code == 200, r.content
        assert api_status(reviewer, tid) == "cancelled"
        assert not pending(tid)
        assert not StackFrame.objects.filter(thread_id=tid, status="active").exists()
