"""The session worker's gate (tests.worker_gate), which keeps its tasks away from a test's
flush: closing it waits for the task that runs, and while it is closed no task starts, beat's
sweeps included; opened, they run again."""

import threading
import time
from pathlib import Path
from typing import Any

import pytest
from django.conf import settings

from agents.models import Event
from infra import last_runs
from tests.conftest import operator_of, wait_for
from tests.worker import hanging_tools  # noqa: F401 - registers `wait_for_file` here too

pytestmark = pytest.mark.worker

AGENTS = """
agents:
  - name: waits
    model: scripted
    tools: [wait_for_file]
    script:
      - text: Waiting for the word.
        tool_calls:
          - {{name: wait_for_file, input: {{path: "{path}"}}}}
      - text: Done.
"""


class WorkerGateTestCase:
    def test_closing_waits_for_the_running_task_and_holds_beats_sweeps(
        self, worker: Any, api: Any, load_agents: Any, tmp_path: Path
    ) -> None:
        word = tmp_path / "word"
        load_agents(AGENTS.format(path=word))
        r = operator_of(api("reviewer")).post("/api/threads", {"agent": "waits", "message": "go"})
        assert r.status_code == 201, r.content
        thread_id = r.json()["id"]
        wait_for(Path(f"{word}.started").exists, timeout=60, what="the tool to start")

        closer = threading.Thread(target=worker.gate.close)
        closer.start()
        try:
            # The task runs the tool, which waits for the word: the gate cannot close yet.
            closer.join(1)
            assert closer.is_alive(), "the gate closed while a task was running"
        finally:
            word.touch()
            closer.join(60)
        assert not closer.is_alive()
        # Closed once the task ended: what the task did is saved before a flush could come.
        assert Event.objects.filter(thread_id=thread_id, type=Event.Type.TOOL_RESULT).exists()

        # Beat goes on sending the sweep every SWEEP_INTERVAL_SECONDS; none runs while closed.
        swept = last_runs.last_run("sweep")
        time.sleep(3 * settings.SWEEP_INTERVAL_SECONDS)
        assert last_runs.last_run("sweep") == swept

        worker.gate.open()
        wait_for(
            lambda: (last_runs.last_run("sweep") or 0) > (swept or 0),
            timeout=30,
            what="a sweep once the gate opened",
        )
