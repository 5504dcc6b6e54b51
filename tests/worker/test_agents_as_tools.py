"""Agents as tools through a real Celery worker (two worker processes): instances of one batch
run side by side, each may stop for approval on its own, and the parent resumes once, with
every result in the order of its calls."""

import os
import signal
from datetime import datetime
from typing import Any

import pytest
from django.test import Client

from agents.models import Event, StackFrame, Suspension, Thread
from agents.runtime import messages as msgs
from demo.models import DemoAction
from tests.conftest import operator_of, wait_for

pytestmark = pytest.mark.worker

AGENTS = """
agents:
  - name: fanout
    model: scripted
    agents_as_tools: [slow]
    script:
      - text: Two slow jobs at once.
        tool_calls:
          - {name: agent__slow, input: {text: first}}
          - {name: agent__slow, input: {text: second}}
      - text: Both done.
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
          - {name: agent__asker, input: {json: {report: weekly}}}
      - text: Batch over.
  - name: mixed
    model: scripted
    tools: [lookup_account, transfer_funds]
    agents_as_tools: [slow]
    script:
      - tool_calls:
          - {name: agent__slow, input: {text: background}}
          - {name: lookup_account, input: {account: A-1}}
          - {name: transfer_funds, input: {from_account: A-1, to_account: B-2, amount: 9}}
      - text: Mixed batch over.
"""


@pytest.fixture(autouse=True)
def agents(load_agents: Any) -> None:
    load_agents(AGENTS)


def start(api: Any, agent: str) -> str:
    r = operator_of(api).post("/api/threads", {"agent": agent, "message": "go"})
    assert r.status_code == 201, r.content
    return r.json()["id"]


def wait_status(thread_id: str, status: str, timeout: float = 30) -> Thread:
    return wait_for(
        lambda: Thread.objects.filter(pk=thread_id, status=status).first(),
        timeout=timeout,
        what=f"thread {thread_id} to become {status} "
        f"(is {Thread.objects.get(pk=thread_id).status})",
    )


def events(thread_id: str, type: str) -> list[Event]:
    return list(Event.objects.filter(thread_id=thread_id, type=type).order_by("id"))


def main_frame(thread_id: str) -> StackFrame:
    return StackFrame.objects.get(thread_id=thread_id, depth=0)


def assistant_turns(frame: StackFrame) -> int:
    return sum(1 for m in frame.messages if m["role"] == "assistant")


def results_in_order(frame: StackFrame) -> list[dict[str, Any]]:
    """The tool_results answering the frame's first assistant message, as stored."""
    first = next(i for i, m in enumerate(frame.messages) if m["role"] == "assistant")
    reply = frame.messages[first + 1]
    calls = [u["id"] for u in msgs.tool_uses(frame.messages[first]["content"])]
    results = [b for b in reply["content"] if b["type"] == "tool_result"]
    assert [b["tool_use_id"] for b in results] == calls, "results are not in call order"
    return results


def when(event: Event, key: str) -> datetime:
    return datetime.fromisoformat(event.payload[key])


def pending(thread_id: str) -> list[Suspension]:
    return list(Suspension.objects.filter(thread_id=thread_id, status="pending"))


def decide(api: Any, s: Suspension, decision: dict[str, Any]) -> None:
    r = api.post(f"/api/threads/{s.thread_id}/suspensions/{s.id}/resume", decision)
    assert r.status_code == 202, r.content


class AgentsAsToolsTestCase:
    def test_two_instances_run_at_the_same_time(self, worker: Any, api: Any) -> None:
        tid = start(api("reviewer"), "fanout")
        wait_status(tid, "completed")
        started = {e.payload["instance"]: e for e in events(tid, "INSTANCE_STARTED")}
        finished = {e.payload["instance"]: e for e in events(tid, "INSTANCE_FINISHED")}
        assert set(started) == set(finished) == {"slow[1]", "slow[2]"}
        # Each ran a 2 s pause; they overlapped: each started before the other finished.
        one, two = (finished["slow[1]"], finished["slow[2]"])
        assert when(one, "started_at") < when(two, "finished_at")
        assert when(two, "started_at") < when(one, "finished_at")
        assert all(e.payload["status"] == "done" for e in finished.values())
        assert all(e.payload["tools"] == ["pause"] for e in finished.values())
        # The parent was resumed once, with both results in call order.
        main = main_frame(tid)
        assert assistant_turns(main) == 2
        results = results_in_order(main)
        assert [r["content"] for r in results] == ["Slept.", "Slept."]
        # Each instance got its own input (argument mapping: text).
        inputs = sorted(
            f.messages[0]["content"][0]["text"]
            for f in StackFrame.objects.filter(thread_id=tid, instance__gt=0)
        )
        assert inputs == ["first", "second"]
        assert Thread.objects.get(pk=tid).result == "Both done."

    def test_one_instance_waits_for_approval_while_its_sibling_finishes(
        self, worker: Any, api: Any, users: Any
    ) -> None:
        reviewer = api("reviewer")
        tid = start(reviewer, "split")
        s = wait_for(lambda: (pending(tid) or [None])[0], what="the instance's suspension")
        assert s.lineage == "main → agent:asker[2]"
        suspended = events(tid, "AGENT_SUSPENDED")[0]
        assert suspended.payload["instance"] == "asker[2]"
        # The sibling finishes while asker[2] waits.
        done = wait_for(
            lambda: next(
                (e for e in events(tid, "INSTANCE_FINISHED") if e.payload["instance"] == "slow[1]"),
                None,
            ),
            what="slow[1] to finish",
        )
        # Nothing works any more: the parent waits for asker[2], which waits for a person.
        wait_status(tid, "suspended")
        assert assistant_turns(main_frame(tid)) == 1  # the parent has not moved
        api_view = reviewer.get(f"/api/suspensions/{s.id}").json()
        assert api_view["lineage"] == "main → agent:asker[2]"
        # The inbox card says which instance asks (the agent with its instance number).
        page = Client()
        page.force_login(users["reviewer"])
        card = page.get("/").content.decode()
        assert f'id="s-{s.id}"' in card and 'title="The agent asking">asker[2]</span>' in card
        decide(reviewer, s, {"approved": True})
        wait_status(tid, "completed")
        decided = events(tid, "SUSPENSION_DECIDED")[0]
        assert done.id < decided.id
        main = main_frame(tid)
        assert assistant_turns(main) == 2  # resumed once
        results = results_in_order(main)
        assert [r["content"] for r in results] == ["Slept.", "Published."]
        assert not any(r.get("is_error") for r in results)
        asker = StackFrame.objects.get(thread_id=tid, agent_name="asker")
        assert asker.messages[0]["content"][0]["text"] == '{"report": "weekly"}'  # json mapping
        # The audit trail names the instance too.
        page.force_login(users["admin"])
        assert "main → agent:asker[2]" in page.get("/audit/").content.decode()

    def test_a_rejection_inside_an_instance_fails_that_call_only(
        self, worker: Any, api: Any
    ) -> None:
        reviewer = api("reviewer")
        tid = start(reviewer, "split")
        s = wait_for(lambda: (pending(tid) or [None])[0], what="the instance's suspension")
        decide(reviewer, s, {"approved": False, "reason": "not this week"})
        wait_status(tid, "completed")
        main = main_frame(tid)
        assert assistant_turns(main) == 2
        slow, asker = results_in_order(main)
        assert slow["content"] == "Slept." and not slow.get("is_error")
        assert asker["is_error"] is True
        assert asker["content"] == "Error: The reviewer said no."
        finished = {e.payload["instance"]: e.payload for e in events(tid, "INSTANCE_FINISHED")}
        assert finished["asker[2]"]["status"] == "failed"
        assert finished["slow[1]"]["status"] == "done"

    def test_a_mixed_batch_resumes_the_parent_once(self, worker: Any, api: Any) -> None:
        reviewer = api("reviewer")
        tid = start(reviewer, "mixed")
        s = wait_for(lambda: (pending(tid) or [None])[0], what="the transfer's suspension")
        assert s.tool_name == "transfer_funds" and s.lineage == "main"
        decide(reviewer, s, {"approved": True})
        wait_status(tid, "completed")
        main = main_frame(tid)
        assert assistant_turns(main) == 2
        slow, lookup, transfer = results_in_order(main)
        assert slow["content"] == "Slept."
        assert "A-1" in lookup["content"]
        assert not transfer.get("is_error")
        assert DemoAction.objects.filter(thread_id=tid, tool="transfer_funds").count() == 1
        assert Thread.objects.get(pk=tid).result == "Mixed batch over."

    def test_cancel_during_a_batch_unwinds_every_instance(self, worker: Any, api: Any) -> None:
        reviewer = api("reviewer")
        tid = start(reviewer, "split")
        wait_for(lambda: pending(tid), what="the instance's suspension")
        wait_for(lambda: len(events(tid, "INSTANCE_STARTED")) == 2, what="both instances to start")
        r = reviewer.post(f"/api/threads/{tid}/cancel")
        assert r.status_code == 200, r.content
        assert not pending(tid)
        if r.json()["status"] == "cancelling":
            # slow[1] was in its pause: the cancel waits for its result (agents.cancelling).
            [asked] = events(tid, "THREAD_CANCELLING")
            assert asked.payload["waiting_for"] == ["pause"]
        wait_status(tid, "cancelled")
        assert not StackFrame.objects.filter(thread_id=tid, status="active").exists()
        cancelled = events(tid, "THREAD_CANCELLED")[0]
        finished = {e.payload["instance"]: e.payload for e in events(tid, "INSTANCE_FINISHED")}
        assert finished["asker[2]"]["status"] == "cancelled"
        # A pause that started has its result before the end: its call is saved as it starts,
        # and a cancel while it runs waits for its result.
        before = Event.objects.filter(thread_id=tid, id__lt=cancelled.id, payload__tool="pause")
        called = set(before.filter(type="TOOL_CALLED").values_list("payload__tool_use_id"))
        answered = set(before.filter(type="TOOL_RESULT").values_list("payload__tool_use_id"))
        assert called == answered, (called, answered)
        # Nothing of the run works after its end.
        wait_for(
            lambda: not StackFrame.objects.filter(thread_id=tid).exclude(lease_owner="").exists(),
            what="the instances to give their leases back",
        )
        import time

        time.sleep(2.5)
        later = Event.objects.filter(thread_id=tid, id__gt=cancelled.id)
        assert not later.exclude(type="INSTANCE_FINISHED").exists(), list(later)
        assert Thread.objects.get(pk=tid).status == "cancelled"

    def test_a_worker_killed_while_instances_run_loses_nothing(self, worker: Any, api: Any) -> None:
        tid = start(api("reviewer"), "fanout")
        wait_for(lambda: len(events(tid, "INSTANCE_STARTED")) == 2, what="both instances to start")
        wait_for(
            lambda: (
                StackFrame.objects.filter(thread_id=tid, instance__gt=0)
                .exclude(lease_owner="")
                .count()
                == 2
            ),
            what="both instances to be taken by the worker",
        )
        os.killpg(worker.proc.pid, signal.SIGKILL)
        worker.proc.wait()
        worker.start()
        wait_status(tid, "completed", timeout=90)
        finished = events(tid, "INSTANCE_FINISHED")
        assert sorted(e.payload["instance"] for e in finished) == ["slow[1]", "slow[2]"]
        main = main_frame(tid)
        assert assistant_turns(main) == 2
        assert [r["content"] for r in results_in_order(main)] == ["Slept.", "Slept."]
        # Every call has one result: nothing ran again once its result was saved.
        results = [e.payload["tool_use_id"] for e in events(tid, "TOOL_RESULT")]
        assert len(results) == len(set(results)) == 4  # two pauses, two instance results
        for f in StackFrame.objects.filter(thread_id=tid, instance__gt=0):
            assert assistant_turns(f) == 2


WORDS = " ".join(f"word{n}" for n in range(240))
STREAMING = f"""
agents:
  - name: talker
    model: scripted
    stream: true
    script:
      - text: {WORDS}
"""


class StreamingWorkerTestCase:
    def test_text_streams_into_the_live_view_and_is_stored_once(
        self, worker: Any, api: Any, load_agents: Any
    ) -> None:
        from agents.models import LiveText

        load_agents(STREAMING)
        tid = start(api("reviewer"), "talker")
        live = wait_for(
            lambda: LiveText.objects.filter(thread_id=tid).exclude(text="").first(),
            what="the live text",
        )
        assert WORDS.startswith(live.text) and live.text != WORDS
        assert not events(tid, "AGENT_MESSAGE")  # the record comes when the answer is whole
        wait_status(tid, "completed")
        (message,) = events(tid, "AGENT_MESSAGE")
        assert message.payload["text"] == WORDS
        assert not LiveText.objects.filter(thread_id=tid).exists()
        # Deltas are a live view: no Event row per token.
        assert Event.objects.filter(thread_id=tid).count() < 6

    def test_a_worker_killed_mid_stream_makes_only_that_model_call_again(
        self, worker: Any, api: Any, load_agents: Any
    ) -> None:
        from agents.models import LiveText

        load_agents(STREAMING)
        tid = start(api("reviewer"), "talker")
        wait_for(
            lambda: LiveText.objects.filter(thread_id=tid).exclude(text="").exists(),
            what="the live text",
        )
        os.killpg(worker.proc.pid, signal.SIGKILL)
        worker.proc.wait()
        worker.start()
        wait_status(tid, "completed", timeout=90)
        (message,) = events(tid, "AGENT_MESSAGE")
        assert message.payload["text"] == WORDS
        assert assistant_turns(main_frame(tid)) == 1
        assert not LiveText.objects.filter(thread_id=tid).exists()


TIMEOUTS = """
agents:
  - name: clerk
    model: scripted
    input_timeout: 1
    script:
      - text: Which form?
      - tool_calls:
          - {name: complete, input: {result: Filed.}}
  - name: patient_clerk
    model: scripted
    input_timeout: 1
    on_input_timeout: continue
    script:
      - text: Which form?
      - tool_calls:
          - {name: complete, input: {result: Filed without an answer.}}
  - name: desk
    model: scripted
    sub_agents: [clerk, patient_clerk]
    script:
      - tool_calls:
          - {name: use_agent, input: {name: clerk, message: file it}}
      - text: Done.
  - name: patient_desk
    model: scripted
    sub_agents: [patient_clerk]
    script:
      - tool_calls:
          - {name: use_agent, input: {name: patient_clerk, message: file it}}
      - text: Done anyway.
"""


class InputTimeoutWorkerTestCase:
    """The sweep applies an input timeout within 2 s of its deadline (issue 10)."""

    def test_an_unanswered_question_cancels_the_thread_at_its_deadline(
        self, worker: Any, api: Any, load_agents: Any
    ) -> None:
        load_agents(TIMEOUTS)
        tid = start(api("reviewer"), "desk")
        wait_status(tid, "cancelled")
        (timeout,) = events(tid, "INPUT_TIMEOUT")
        late = timeout.created_at - datetime.fromisoformat(timeout.payload["expires_at"])
        assert late.total_seconds() < 2, late
        (cancelled,) = events(tid, "THREAD_CANCELLED")
        assert cancelled.payload["reason"] == "no answer came before the input timeout"

    def test_or_tells_the_agent_and_goes_on(self, worker: Any, api: Any, load_agents: Any) -> None:
        load_agents(TIMEOUTS)
        tid = start(api("reviewer"), "patient_desk")
        wait_status(tid, "completed")
        (timeout,) = events(tid, "INPUT_TIMEOUT")
        late = timeout.created_at - datetime.fromisoformat(timeout.payload["expires_at"])
        assert late.total_seconds() < 2, late
        assert Thread.objects.get(pk=tid).result == "Done anyway."
