"""The clock (gateway.clock), run in this process on the test database: it only looks while
nothing is due, wakes at a stored deadline, runs the sweeper often while a run is in motion,
and holds the beat lease while it runs. The jobs are the real tasks, run by `Task.apply`."""

import importlib
import os
import signal
import sys
import threading
import time
from collections import Counter
from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
from celery.signals import task_prerun
from django.utils import timezone

from agents import deadlines
from agents.models import Suspension, Thread
from gateway.celery import app
from gateway.clock import Clock, Job, guard_forks, running_job
from infra import beat_lease, last_runs
from tests.approvals import state
from tests.conftest import wait_for


@pytest.fixture
def runs(monkeypatch: pytest.MonkeyPatch) -> Iterator[Counter]:
    """How many times each task ran in this process (the clock's jobs), and how many of the
    sweeper's runs swept ("swept"), not only looked."""
    seen: Counter = Counter()
    lock = threading.Lock()

    def count(sender: Any = None, **kwargs: Any) -> None:
        with lock:
            seen[sender.name] += 1

    expire_all = deadlines.expire_all_overdue

    def sweeping(*args: Any, **kwargs: Any) -> int:
        with lock:
            seen["swept"] += 1
        return expire_all(*args, **kwargs)

    monkeypatch.setattr(deadlines, "expire_all_overdue", sweeping)
    task_prerun.connect(count, weak=False)
    yield seen
    task_prerun.disconnect(count)


@pytest.fixture
def clock(settings: Any, transactional_db: Any) -> Iterator[Any]:
    started: list[Clock] = []

    def start(idle: float, interval: float = 0.2) -> Clock:
        settings.SWEEP_IDLE_SECONDS = idle
        settings.SWEEP_INTERVAL_SECONDS = interval
        settings.CLOCK_JOBS = {"sweep": {"task": "agents.tasks.sweep", "every": interval}}
        c = Clock(app)
        c.start()
        started.append(c)
        return c

    yield start
    for c in started:
        c.stop()


class ClockTestCase:
    def test_with_nothing_due_it_only_looks_when_it_next_is(
        self, clock: Any, runs: Counter
    ) -> None:
        before = last_runs.last_run("sweep")
        c = clock(idle=30)
        # It looked: /readyz sees the sweeper as alive.
        wait_for(lambda: last_runs.last_run("sweep") != before, timeout=10, what="the first look")
        assert c.holding
        # Given 0.2 s while a run is in motion, it would have swept some ten times by now.
        threading.Event().wait(2)
        assert runs["agents.tasks.sweep"] == 1  # the look, a task (a gate holds it too)
        assert runs["swept"] == 0

    def test_it_sweeps_every_interval_while_a_run_is_in_motion(
        self, clock: Any, runs: Counter, users: dict[str, Any]
    ) -> None:
        state.thread(users["operator"], status=Thread.Status.RUNNING)
        clock(idle=30)
        wait_for(lambda: runs["swept"] >= 5, timeout=10, what="five sweeps")

    def test_it_wakes_at_a_stored_deadline(
        self, clock: Any, runs: Counter, users: dict[str, Any]
    ) -> None:
        _, [s] = state.suspended(users["operator"], expires_in=600)
        Suspension.objects.filter(pk=s.pk).update(
            expires_at=timezone.now() + timedelta(seconds=1.5)
        )
        clock(idle=60)
        threading.Event().wait(1)
        assert runs["swept"] == 0  # nothing due yet: asleep until the deadline
        wait_for(
            lambda: Suspension.objects.get(pk=s.pk).status == Suspension.Status.TIMED_OUT,
            timeout=20,  # a third of the clock's longest sleep
            what="the deadline to be applied",
        )

    def test_a_request_raised_while_it_sleeps_is_seen_within_an_interval(
        self, clock: Any, runs: Counter, users: dict[str, Any]
    ) -> None:
        clock(idle=60)
        wait_for(lambda: runs["agents.tasks.sweep"] >= 1, timeout=10, what="the first look")
        # Raised with its event while the clock sleeps for a minute: the newest event's id,
        # read every interval, wakes it, and it plans from the new row.
        _, [s] = state.suspended(users["operator"], expires_in=2)
        wait_for(
            lambda: Suspension.objects.get(pk=s.pk).status == Suspension.Status.TIMED_OUT,
            timeout=20,  # a third of the clock's longest sleep
            what="the deadline to be applied",
        )

    def test_it_gives_the_lease_back_when_it_stops(self, clock: Any, runs: Counter) -> None:
        c = clock(idle=30)
        wait_for(lambda: c.holding, timeout=10, what="the clock to take the lease")
        assert beat_lease.holder() == c.name
        c.stop()
        assert not c.thread.is_alive()
        assert beat_lease.holder() is None


@pytest.mark.django_db
def test_a_round_with_work_left_stays_busy(users: dict[str, Any]) -> None:
    # A delivery left pending by a dead worker keeps its round at its interval; here any
    # pending row of a model, as a job's `busy_while` names it.
    job = Job(
        "x",
        "agents.tasks.sweep",
        1.0,
        here=True,
        busy_while=("agents.Suspension", {"status": "pending"}),
    )
    assert not job.has_work_left()
    state.suspended(users["operator"])
    assert job.has_work_left()
    assert not Job("y", "agents.tasks.sweep", 1.0, here=True).has_work_left()


def test_a_fork_waits_for_the_job_the_clock_runs(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A job imports a module where it is used, slowly; the prefork pool forks a new child
    # meanwhile, from another thread. The child imports the same module: had it been forked
    # mid-import, it would hold that module's lock through a thread it does not have, forever.
    (tmp_path / "clock_slow_import.py").write_text("import time\n\ntime.sleep(1.0)\nVALUE = 7\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.delitem(sys.modules, "clock_slow_import", raising=False)
    guard_forks()
    importing = threading.Event()

    def job() -> None:
        with running_job():
            importing.set()
            importlib.import_module("clock_slow_import")

    running = threading.Thread(target=job)
    running.start()
    assert importing.wait(10)
    pid = os.fork()
    if pid == 0:  # the child: exits 0 once it has the module
        try:
            import clock_slow_import

            os._exit(0 if clock_slow_import.VALUE == 7 else 1)
        finally:
            os._exit(2)
    running.join()
    deadline = time.monotonic() + 20
    while not (ended := os.waitpid(pid, os.WNOHANG))[0]:
        if time.monotonic() > deadline:
            os.kill(pid, signal.SIGKILL)
            os.waitpid(pid, 0)
            pytest.fail("the child hung on the import its parent's clock was making")
        time.sleep(0.05)
    assert os.waitstatus_to_exitcode(ended[1]) == 0
