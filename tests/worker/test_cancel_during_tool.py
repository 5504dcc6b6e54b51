"""A cancel that arrives while an approved tool runs, through the API and a real Celery
worker: the run says `cancelling` until the tool returns, its result is in the trail, then
the run is cancelled, and the model is not called again."""

from pathlib import Path
from typing import Any

import pytest
from django.test import Client

from agents.models import Event, Suspension, Thread
from tests.conftest import operator_of, wait_for
from tests.worker import held_tools  # noqa: F401 - registers `held_transfer` in this process too

pytestmark = pytest.mark.worker

AGENTS = """
agents:
  - name: payer
    model: scripted
    tools: [held_transfer]
    script:
      - text: Paying the invoice.
        tool_calls:
          - {{name: held_transfer, input: {{path: "{path}"}}}}
      - text: Paid.
"""


class CancelDuringToolTestCase:
    def test_the_tool_result_is_recorded_before_the_run_is_cancelled(
        self, worker: Any, api: Any, users: Any, load_agents: Any, tmp_path: Path
    ) -> None:
        gate = tmp_path / "release"
        load_agents(AGENTS.format(path=gate))
        reviewer = api("reviewer")
        r = operator_of(reviewer).post("/api/threads", {"agent": "payer", "message": "pay"})
        assert r.status_code == 201, r.content
        tid = r.json()["id"]
        s = wait_for(
            lambda: Suspension.objects.filter(thread_id=tid, status="pending").first(),
            what="the transfer to wait for a reviewer",
        )
        url = f"/api/threads/{tid}/suspensions/{s.pk}/resume"
        assert reviewer.post(url, {"approved": True}).status_code == 202
        wait_for(lambda: Path(f"{gate}.started").exists(), what="the approved transfer to start")

        r = reviewer.post(f"/api/threads/{tid}/cancel")
        # At once, while the transfer still runs: the run is cancelling, not cancelled.
        assert r.status_code == 200, r.content
        assert r.json()["status"] == "cancelling"
        assert not Path(f"{gate}.done").exists()
        assert reviewer.get(f"/api/threads/{tid}").json()["status"] == "cancelling"
        # The thread page says so too, and why.
        page = Client()
        page.force_login(users["reviewer"])
        html = page.get(f"/threads/{tid}/").content.decode()
        assert 'id="thread-status" data-status="cancelling"' in html
        assert "it ends once held_transfer returns and its result is recorded" in html
        # A second cancel says the same and changes nothing.
        again = reviewer.post(f"/api/threads/{tid}/cancel")
        assert again.status_code == 200 and again.json()["status"] == "cancelling"

        gate.touch()  # the transfer goes on and acts
        thread = wait_for(
            lambda: Thread.objects.filter(pk=tid, status="cancelled").first(),
            what="the cancel to finish after the transfer returned",
        )
        assert Path(f"{gate}.done").read_text() == s.tool_use_id  # the outside effect happened
        trail = list(Event.objects.filter(thread_id=tid).order_by("id"))
        types = [e.type for e in trail]
        decided = types.index("SUSPENSION_DECIDED")
        assert types[decided:] == [
            "SUSPENSION_DECIDED",
            "THREAD_CANCELLING",
            "AGENT_RESUMED",
            "TOOL_RESULT",
            "THREAD_CANCELLED",
        ], types
        asked, result, ended = trail[decided + 1], trail[-2], trail[-1]
        assert asked.actor_name == "alice"
        assert asked.payload["waiting_for"] == ["held_transfer"]
        assert result.payload["tool"] == "held_transfer"
        assert result.payload["tool_use_id"] == s.tool_use_id
        assert result.payload["content"] == "Transferred 10 EUR."
        assert result.payload["is_error"] is False
        assert ended.actor_name == "alice"
        assert ended.payload["cancelled_by"] == "alice"
        assert ended.payload["tools_unfinished"] == []
        # No model call after the tool: the frame ends with the tool's result, unanswered.
        frame = thread.frames.get()
        assert frame.status == "cancelled"
        assert frame.iteration == 1
        last = frame.messages[-1]
        assert last["role"] == "user"
        assert [b["type"] for b in last["content"]] == ["tool_result"]
        assert reviewer.get(f"/api/threads/{tid}").json()["status"] == "cancelled"
        assert reviewer.post(f"/api/threads/{tid}/cancel").status_code == 409
