"""Full cycles through a real Celery worker: suspend, decide, resume, complete."""

import threading
from typing import Any

import pytest

from agents.models import Event, Suspension, Thread
from demo.models import DemoAction
from tests.conftest import operator_of, wait_for

pytestmark = pytest.mark.worker

AGENTS = """
agents:
  - name: payer
    model: scripted
    tools: [lookup_account, transfer_funds]
    script:
      - text: I will pay the supplier.
        tool_calls:
          - {name: transfer_funds, input: {from_account: A-1, to_account: B-2, amount: 200}}
      - text: Paid.
        if_error:
          text: Not paid.
  - name: quick
    model: scripted
    tools: [transfer_funds]
    tool_overrides:
      transfer_funds: {timeout: 1, on_timeout: reject}
    script:
      - tool_calls:
          - {name: transfer_funds, input: {from_account: A-1, to_account: B-2, amount: 5}}
      - text: Went on after the deadline.
  - name: lenient
    model: scripted
    tools: [transfer_funds]
    tool_overrides:
      transfer_funds: {timeout: 1, on_timeout: approve}
    script:
      - tool_calls:
          - {name: transfer_funds, input: {from_account: A-1, to_account: B-2, amount: 7}}
      - text: Went on after the deadline.
  - name: pair
    model: scripted
    tools: [send_email]
    script:
      - text: Two emails.
        tool_calls:
          - {name: send_email, input: {to: one@example.com, subject: First}}
          - {name: send_email, input: {to: two@example.com, subject: Second}}
      - text: Sent what was approved.
"""


def start(api: Any, agent: str) -> str:
    r = operator_of(api).post("/api/threads", {"agent": agent, "message": "go"})
    assert r.status_code == 201, r.content
    return r.json()["id"]


def wait_status(thread_id: str, status: str, timeout: float = 10) -> Thread:
    return wait_for(
        lambda: Thread.objects.filter(pk=thread_id, status=status).first(),
        timeout=timeout,
        what=f"thread {thread_id} to become {status} "
        f"(is {Thread.objects.get(pk=thread_id).status})",
    )


def pending(thread_id: str) -> list[Suspension]:
    return list(Suspension.objects.filter(thread_id=thread_id, status="pending"))


def resume(api: Any, thread_id: str, suspension_id: Any, decision: dict) -> Any:
    return api.post(f"/api/threads/{thread_id}/suspensions/{suspension_id}/resume", decision)


def event_types(api: Any, thread_id: str) -> list[str]:
    r = api.get("/api/events", thread=thread_id)
    assert r.status_code == 200
    return [e["type"] for e in r.json()["events"]]


def tool_results(thread_id: str) -> list[dict]:
    return [
        e.payload
        for e in Event.objects.filter(thread_id=thread_id, type="TOOL_RESULT").order_by("id")
    ]


class CycleTestCase:
    @pytest.fixture(autouse=True)
    def setup(self, worker: Any, api: Any, load_agents: Any) -> None:
        load_agents(AGENTS)
        self.api = api("reviewer")

    def test_approval_runs_the_tool_once_and_completes(self) -> None:
        tid = start(self.api, "payer")
        wait_status(tid, "suspended")
        [s] = pending(tid)
        assert s.tool_name == "transfer_funds" and s.prompt == "I will pay the supplier."
        assert "AGENT_SUSPENDED" in event_types(self.api, tid)

        r = resume(self.api, tid, s.id, {"approved": True})
        assert r.status_code == 202
        thread = wait_status(tid, "completed")
        assert thread.result == "Paid."
        [action] = DemoAction.objects.filter(thread_id=tid)
        assert action.arguments == {"from_account": "A-1", "to_account": "B-2", "amount": 200}
        types = event_types(self.api, tid)
        tail = [
            t
            for t in types
            if t in ("SUSPENSION_DECIDED", "AGENT_RESUMED", "TOOL_RESULT", "THREAD_COMPLETED")
        ]
        assert tail == ["SUSPENSION_DECIDED", "AGENT_RESUMED", "TOOL_RESULT", "THREAD_COMPLETED"]
        s.refresh_from_db()
        assert s.decided_by.username == "alice" and s.resumed_at is not None

    def test_rejection_tells_the_model_who_and_why_and_the_tool_never_runs(self) -> None:
        tid = start(self.api, "payer")
        wait_status(tid, "suspended")
        [s] = pending(tid)
        r = resume(self.api, tid, s.id, {"approved": False, "reason": "wrong supplier"})
        assert r.status_code == 202
        thread = wait_status(tid, "completed")
        assert thread.result == "Not paid."
        assert not DemoAction.objects.filter(thread_id=tid).exists()
        [result] = tool_results(tid)
        assert result["is_error"] is True
        assert "alice" in result["content"] and "wrong supplier" in result["content"]
        # The model itself saw the error tool_result.
        frame = thread.frames.get(depth=0)
        block = frame.messages[2]["content"][0]
        assert block["type"] == "tool_result" and block["is_error"] is True
        assert "wrong supplier" in block["content"]

    def test_modified_args_run_the_tool_with_the_edit(self) -> None:
        tid = start(self.api, "payer")
        wait_status(tid, "suspended")
        [s] = pending(tid)
        edited = {"from_account": "A-1", "to_account": "B-2", "amount": 150}
        r = resume(self.api, tid, s.id, {"approved": True, "modifiedArgs": edited})
        assert r.status_code == 202
        wait_status(tid, "completed")
        [action] = DemoAction.objects.filter(thread_id=tid)
        assert action.arguments == edited

    def test_invalid_modified_args_are_refused_and_the_suspension_stays_pending(self) -> None:
        tid = start(self.api, "payer")
        wait_status(tid, "suspended")
        [s] = pending(tid)
        r = resume(
            self.api,
            tid,
            s.id,
            {
                "approved": True,
                "modifiedArgs": {"from_account": "A-1", "to_account": "B-2", "amount": "lots"},
            },
        )
        assert r.status_code == 400
        assert "modifiedArgs.amount" in r.json()["fields"]
        s.refresh_from_db()
        assert s.status == "pending"
        assert Thread.objects.get(pk=tid).status == "suspended"
        assert not Event.objects.filter(thread_id=tid, type="SUSPENSION_DECIDED").exists()

    def test_a_deadline_rejects_automatically_and_the_run_goes_on(self) -> None:
        tid = start(self.api, "quick")
        wait_status(tid, "suspended")
        [s] = pending(tid)
        wait_status(tid, "completed", timeout=1 + 2 + 2)
        s.refresh_from_db()
        assert s.status == "timed_out" and s.approved is False
        assert (s.decided_at - s.expires_at).total_seconds() < 2
        assert Event.objects.filter(suspension=s, type="SUSPENSION_TIMEOUT").count() == 1
        assert not DemoAction.objects.filter(thread_id=tid).exists()
        [result] = tool_results(tid)
        assert result["is_error"] and "rejected automatically" in result["content"]

    def test_on_timeout_approve_approves_at_the_deadline(self) -> None:
        tid = start(self.api, "lenient")
        wait_status(tid, "suspended")
        wait_status(tid, "completed", timeout=5)
        [s] = Suspension.objects.filter(thread_id=tid)
        assert s.status == "timed_out" and s.approved is True
        assert DemoAction.objects.filter(thread_id=tid, tool="transfer_funds").count() == 1

    def test_two_blocking_calls_form_one_group_and_resume_after_both(self) -> None:
        tid = start(self.api, "pair")
        wait_status(tid, "suspended")
        first, second = sorted(pending(tid), key=lambda s: s.tool_input["to"])
        assert first.group == second.group
        assert resume(self.api, tid, first.id, {"approved": True}).status_code == 202
        assert Thread.objects.get(pk=tid).status == "suspended"
        assert not Event.objects.filter(thread_id=tid, type="AGENT_RESUMED").exists()
        assert (
            resume(self.api, tid, second.id, {"approved": False, "reason": "not yet"}).status_code
            == 202
        )
        wait_status(tid, "completed")
        sent = [a.arguments["to"] for a in DemoAction.objects.filter(thread_id=tid)]
        assert sent == ["one@example.com"]
        results = tool_results(tid)
        assert [r["is_error"] for r in results] == [False, True]
        assert Event.objects.filter(thread_id=tid, type="AGENT_RESUMED").count() == 2

    def test_a_resume_delivered_twice_runs_the_tool_once(self) -> None:
        from agents import tasks

        tid = start(self.api, "payer")
        wait_status(tid, "suspended")
        [s] = pending(tid)
        assert resume(self.api, tid, s.id, {"approved": True}).status_code == 202
        # The same message again, twice more, while the first may still be running.
        tasks.resume_thread.delay(tid)
        tasks.resume_thread.delay(tid)
        wait_status(tid, "completed")
        tasks.resume_thread.delay(tid)
        assert tasks.resume_thread.apply(args=[tid]).get() is False  # in-process: nothing to do
        wait_for(lambda: Event.objects.filter(thread_id=tid, type="THREAD_COMPLETED").exists())
        assert DemoAction.objects.filter(thread_id=tid).count() == 1
        assert Event.objects.filter(thread_id=tid, type="TOOL_RESULT").count() == 1
        assert Event.objects.filter(thread_id=tid, type="THREAD_COMPLETED").count() == 1

    def test_concurrent_conflicting_decisions_have_exactly_one_winner(self) -> None:
        from django.db import connection

        tid = start(self.api, "payer")
        wait_status(tid, "suspended")
        [s] = pending(tid)
        codes: list[int] = []
        barrier = threading.Barrier(20, timeout=30)

        def decide(i: int) -> None:
            from django.contrib.auth.models import User

            from tests.conftest import Api

            try:
                client = Api(User.objects.get(username="alice" if i % 2 else "bob"))
                barrier.wait()
                body = {"approved": True} if i % 2 else {"approved": False, "reason": f"no {i}"}
                codes.append(resume(client, tid, s.id, body).status_code)
            finally:
                connection.close()

        threads = [threading.Thread(target=decide, args=(i,)) for i in range(20)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        assert codes.count(202) == 1, codes
        assert set(codes) <= {202, 200, 409}
        assert Event.objects.filter(suspension=s, type="SUSPENSION_DECIDED").count() == 1
        wait_status(tid, "completed")
