"""LOG_FORMAT=json: one JSON object per line with the level, logger, message, time and the
ids the line is about, bound for each Celery task from its arguments; plain stays the
default."""

import io
import json
import logging
import os
import re
import subprocess
import sys
import time
from collections.abc import Iterator
from datetime import datetime
from pathlib import Path
from typing import Any

import pytest

from infra import logs
from tests.conftest import ROOT, WorkerProcess, wait_for


@pytest.fixture
def lines() -> Iterator[tuple[logging.Logger, io.StringIO]]:
    """A logger writing JSON lines, through the ids filter, to a buffer."""
    out = io.StringIO()
    handler = logging.StreamHandler(out)
    handler.setFormatter(logs.JsonLines())
    handler.addFilter(logs.ContextFilter())
    logger = logging.getLogger(f"tests.json.{id(out)}")
    logger.addHandler(handler)
    logger.setLevel(logging.INFO)
    logger.propagate = False
    yield logger, out
    logger.removeHandler(handler)


def parsed(out: io.StringIO) -> list[dict[str, Any]]:
    return [json.loads(line) for line in out.getvalue().splitlines()]


class JsonLinesTestCase:
    def test_a_line_names_what_it_is_about(self, lines: Any) -> None:
        logger, out = lines
        token = logs.bind(thread_id="t-1", suspension_id="s-1", task_id="k-1", task="x.y")
        try:
            logger.warning("lease of %s lost", "t-1")
        finally:
            logs.unbind(token)
        logger.info("after the task")

        first, second = parsed(out)
        assert first["level"] == "WARNING" and first["message"] == "lease of t-1 lost"
        assert first["logger"] == logger.name
        assert datetime.fromisoformat(first["time"]).utcoffset().total_seconds() == 0
        assert {k: first[k] for k in ("thread_id", "suspension_id", "task_id", "task")} == {
            "thread_id": "t-1",
            "suspension_id": "s-1",
            "task_id": "k-1",
            "task": "x.y",
        }
        assert "frame_id" not in first  # not known: left out, not null
        assert set(second) == {"level", "logger", "message", "time"}

    def test_an_id_passed_with_the_call_wins(self, lines: Any) -> None:
        logger, out = lines
        token = logs.bind(thread_id="bound")
        try:
            logger.info("step", extra={"thread_id": "passed", "frame_id": 7})
        finally:
            logs.unbind(token)
        [line] = parsed(out)
        assert line["thread_id"] == "passed" and line["frame_id"] == 7

    def test_a_traceback_stays_inside_its_line(self, lines: Any) -> None:
        logger, out = lines
        try:
            raise ValueError("bad row")
        except ValueError:
            logger.exception("thread failed")
        [line] = parsed(out)
        assert "ValueError: bad row" in line["exc_info"]

    def test_a_task_binds_the_ids_of_its_arguments(
        self, lines: Any, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        from agents import tasks

        logger, out = lines

        class Engine:
            def advance(self, thread_id: str) -> bool:
                logger.info("advancing")
                return True

            def advance_instance(self, frame_id: str) -> bool:
                logger.info("running an instance")
                return True

        monkeypatch.setattr(tasks, "engine", Engine())
        tasks.resume_thread.apply(args=["0f0f"], task_id="task-1")
        tasks.run_instance.apply(kwargs={"frame_id": 42}, task_id="task-2")
        logger.info("between tasks")

        resumed, instance, between = parsed(out)
        assert resumed["thread_id"] == "0f0f" and resumed["task_id"] == "task-1"
        assert resumed["task"] == "agents.tasks.resume_thread"
        assert instance["frame_id"] == "42" and instance["task_id"] == "task-2"
        assert "thread_id" not in instance
        assert "task_id" not in between and "frame_id" not in between


def settings_of(env: dict[str, str]) -> subprocess.CompletedProcess:
    code = (
        "import django; django.setup(); from django.conf import settings; "
        "print(settings.LOGGING['handlers']['console']['formatter'])"
    )
    return subprocess.run(
        [sys.executable, "-c", code],
        cwd=ROOT,
        env={**env, "DJANGO_SETTINGS_MODULE": "gateway.settings"},
        capture_output=True,
        text=True,
        timeout=60,
    )


def test_plain_is_the_default_and_an_unknown_format_is_refused() -> None:
    env = {k: v for k, v in os.environ.items() if k != "LOG_FORMAT"}
    assert settings_of(env).stdout.strip() == "plain"
    assert settings_of({**env, "LOG_FORMAT": "json"}).stdout.strip() == "json"
    refused = settings_of({**env, "LOG_FORMAT": "xml"})
    assert refused.returncode != 0
    assert "LOG_FORMAT must be 'plain' or 'json'" in refused.stderr


AGENTS = """
agents:
  - name: hasty
    model: scripted
    tools: [transfer_funds]
    tool_overrides:
      transfer_funds: {timeout: 1, on_timeout: reject}
    script:
      - tool_calls:
          - {name: transfer_funds, input: {from_account: A-1, to_account: B-2, amount: 5}}
      - text: Went on without it.
  - name: boss
    model: scripted
    agents_as_tools: [helper]
    script:
      - tool_calls:
          - {name: agent__helper, input: {text: sum it up}}
      - text: Done.
  - name: helper
    description: Sums up.
    model: scripted
    script:
      - text: Summed up.
"""
# A line in the plain format: what must not appear once LOG_FORMAT is json.
PLAIN = re.compile(r"^\d{4}-\d\d-\d\d \d\d:\d\d:\d\d,\d+ [A-Z]+ ")


@pytest.fixture
def json_worker(
    worker_process: WorkerProcess,
    transactional_db: Any,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> Iterator[WorkerProcess]:
    """The session's worker stood down for one started with LOG_FORMAT=json (the next test
    that needs a worker starts the session's again)."""
    from django.utils import timezone

    from agents.models import Thread

    worker_process.stop()
    monkeypatch.setenv("LOG_FORMAT", "json")
    process = WorkerProcess(tmp_path, worker_process.smtp)
    process.start()
    yield process
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        if not Thread.objects.filter(lease_expires_at__gt=timezone.now()).exists():
            break
        time.sleep(0.1)
    process.stop()


@pytest.mark.worker
def test_a_worker_writes_json_lines_with_the_ids_of_its_tasks(
    json_worker: WorkerProcess, api: Any, load_agents: Any
) -> None:
    from agents import tasks
    from agents.models import StackFrame, Suspension, Thread

    load_agents(AGENTS)
    client = api("reviewer")
    timed = client.post("/api/threads", {"agent": "hasty", "message": "go"}).json()["id"]
    boss = client.post("/api/threads", {"agent": "boss", "message": "go"}).json()["id"]
    s = wait_for(lambda: Suspension.objects.filter(thread_id=timed).first(), what="a suspension")
    tasks.expire_suspension.delay(str(s.pk))
    wait_for(
        lambda: Thread.objects.filter(pk__in=[timed, boss], status="completed").count() == 2,
        timeout=20,
        what="both threads to complete",
    )
    instance = StackFrame.objects.get(thread_id=boss, instance__gt=0)
    time.sleep(1)  # the last task's closing line

    records = []
    for line in json_worker.log.read_text().splitlines():
        assert not PLAIN.match(line), line
        if line.startswith("{"):
            records.append(json.loads(line))
    assert records and all({"level", "logger", "message", "time"} <= set(r) for r in records)

    def done(task: str, **ids: str) -> list[dict[str, Any]]:
        return [
            r
            for r in records
            if r.get("task") == f"agents.tasks.{task}"
            and " succeeded in " in r["message"]
            and r.get("task_id")
            and all(r.get(k) == v for k, v in ids.items())
        ]

    assert done("start_thread", thread_id=timed) and done("start_thread", thread_id=boss)
    assert done("resume_thread", thread_id=timed)
    assert done("run_instance", frame_id=str(instance.pk))
    assert done("expire_suspension", suspension_id=str(s.pk))
    received = [r for r in records if r["message"].endswith(" received")]
    assert received and all(r.get("task_id") for r in received)
