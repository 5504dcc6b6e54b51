"""What each kind of decision gives the model, through the API and a real Celery worker:
an answer to ask_user, a displayConfirmation approval, a cancel while suspended."""

import json
from typing import Any

import pytest

from agents.models import Event, Suspension, Thread
from demo.models import DemoAction
from tests.conftest import operator_of, wait_for

pytestmark = pytest.mark.worker

AGENTS = """
agents:
  - name: asker
    model: scripted
    tools: [ask_user]
    script:
      - text: Two environments match.
        tool_calls:
          - {name: ask_user, input: {question: "Staging or production?"}}
      - text: Restarted the one you named.
        if_error:
          text: Nothing restarted.
  - name: confirmer
    model: scripted
    tools: [displayConfirmation, delete_records]
    script:
      - tool_calls:
          - {name: displayConfirmation, input: {action: Delete 5 orders}}
      - tool_calls:
          - {name: delete_records, input: {table: orders, count: 5}}
        if_error:
          text: Deleted nothing.
      - text: Deleted.
"""


def start(api: Any, agent: str) -> tuple[str, Suspension]:
    r = operator_of(api).post("/api/threads", {"agent": agent, "message": "go"})
    assert r.status_code == 201, r.content
    tid = r.json()["id"]
    wait_for(
        lambda: Thread.objects.filter(pk=tid, status="suspended").exists(),
        what=f"thread {tid} to suspend",
    )
    [s] = Suspension.objects.filter(thread_id=tid, status="pending")
    return tid, s


def finished(tid: str) -> Thread:
    return wait_for(
        lambda: Thread.objects.filter(pk=tid, status__in=["completed", "failed"]).first(),
        what=f"thread {tid} to finish",
    )


def tool_result_block(thread: Thread, tool_use_id: str) -> dict:
    frame = thread.frames.get(depth=0)
    for message in frame.messages:
        for block in message["content"] if isinstance(message["content"], list) else []:
            if block.get("type") == "tool_result" and block.get("tool_use_id") == tool_use_id:
                return block
    raise AssertionError(f"no tool_result for {tool_use_id}")


class ResumeKindsTestCase:
    @pytest.fixture(autouse=True)
    def setup(self, worker: Any, api: Any, load_agents: Any) -> None:
        load_agents(AGENTS)
        self.api = api("reviewer")

    def test_an_answer_reaches_the_model_as_the_tool_result(self) -> None:
        tid, s = start(self.api, "asker")
        assert s.kind == "input" and s.tool_input == {"question": "Staging or production?"}
        url = f"/api/threads/{tid}/suspensions/{s.pk}/resume"
        assert self.api.post(url, {"response": "Staging, please."}).status_code == 202
        thread = finished(tid)
        assert thread.status == "completed" and thread.result == "Restarted the one you named."
        block = tool_result_block(thread, s.tool_use_id)
        assert block["content"] == "Staging, please." and not block.get("is_error")
        # Sent again after the run went on, the answer is still just the recorded one.
        assert self.api.post(url, {"response": "Staging, please."}).status_code == 200
        assert self.api.post(url, {"response": "Production."}).status_code == 409

    def test_a_declined_question_tells_the_model_who_declined(self) -> None:
        tid, s = start(self.api, "asker")
        url = f"/api/threads/{tid}/suspensions/{s.pk}/resume"
        assert self.api.post(url, {"approved": False, "reason": "ask ops"}).status_code == 202
        thread = finished(tid)
        assert thread.result == "Nothing restarted."
        block = tool_result_block(thread, s.tool_use_id)
        assert block["is_error"] and "alice" in block["content"] and "ask ops" in block["content"]

    def test_a_confirmation_returns_the_decision_and_the_run_goes_on(self) -> None:
        tid, s = start(self.api, "confirmer")
        url = f"/api/threads/{tid}/suspensions/{s.pk}/resume"
        assert self.api.post(url, {"approved": True, "reason": "old data"}).status_code == 202
        thread = finished(tid)
        assert thread.result == "Deleted."
        answer = json.loads(tool_result_block(thread, s.tool_use_id)["content"])
        assert answer == {"approved": True, "decided_by": "alice", "reason": "old data"}
        assert DemoAction.objects.filter(thread_id=tid, tool="delete_records").count() == 1

    def test_a_cancelled_run_is_never_resumed(self) -> None:
        tid, s = start(self.api, "confirmer")
        r = self.api.post(f"/api/threads/{tid}/cancel")
        assert r.status_code == 200 and r.json()["status"] == "cancelled"
        url = f"/api/threads/{tid}/suspensions/{s.pk}/resume"
        r = self.api.post(url, {"approved": True})
        assert r.status_code == 409 and r.json()["outcome"]["status"] == "cancelled"
        # A resume delivered anyway finds nothing to do.
        from agents import tasks

        marker = Event.objects.latest("id").id
        assert tasks.resume_thread.apply(args=[tid]).get() is False
        thread = Thread.objects.get(pk=tid)
        assert thread.status == "cancelled"
        assert not Event.objects.filter(thread_id=tid, id__gt=marker).exists()
        assert not DemoAction.objects.filter(thread_id=tid).exists()
