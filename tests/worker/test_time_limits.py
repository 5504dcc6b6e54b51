"""A tool call that hangs, through a real Celery worker: stopped at TOOL_TIME_LIMIT_SECONDS
(tests/worker/conftest.py), the model gets an error result for it, and the thread goes on."""

import time
from typing import Any

import pytest

from agents.models import Event, Thread
from tests.conftest import operator_of, wait_for
from tests.worker import hanging_tools  # noqa: F401 - registers `hang` in this process too
from tests.worker.conftest import TOOL_TIME_LIMIT

pytestmark = pytest.mark.worker

AGENTS = """
agents:
  - name: stuck
    model: scripted
    tools: [hang, lookup_account]
    script:
      - text: Asking the slow service.
        tool_calls:
          - {name: hang, input: {}}
      - text: It did not answer; looking the account up instead.
        tool_calls:
          - {name: lookup_account, input: {account: A-1}}
      - text: Done.
"""


class ToolTimeLimitTestCase:
    def test_a_hung_tool_gives_the_model_an_error_and_the_thread_goes_on(
        self, worker: Any, api: Any, load_agents: Any
    ) -> None:
        load_agents(AGENTS)
        started = time.monotonic()
        r = operator_of(api("reviewer")).post("/api/threads", {"agent": "stuck", "message": "go"})
        assert r.status_code == 201, r.content
        thread_id = r.json()["id"]

        thread = wait_for(
            lambda: Thread.objects.filter(pk=thread_id, status="completed").first(),
            timeout=float(TOOL_TIME_LIMIT) + 20,
            what="the thread to go on past the hung call and complete",
        )

        assert time.monotonic() - started >= float(TOOL_TIME_LIMIT)
        results = {
            e.payload["tool"]: e.payload
            for e in Event.objects.filter(thread_id=thread_id, type="TOOL_RESULT")
        }
        assert results["hang"]["is_error"] is True
        assert "did not finish within its time limit (5 s)" in results["hang"]["content"]
        assert results["lookup_account"]["is_error"] is False
        # The model got the error as the hung call's result.
        frame = thread.frames.get()
        [hung] = [
            block
            for m in frame.messages
            if m["role"] == "user" and isinstance(m["content"], list)
            for block in m["content"]
            if block.get("type") == "tool_result" and block.get("is_error")
        ]
        assert "time limit" in str(hung["content"])
