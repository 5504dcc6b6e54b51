"""The clock: the gateway's periodic work (the sweeper: deadlines, reminders, input timeouts,
stalled runs, grants' ends, unanswered reviews; the channels' rounds: email, webhooks, Slack,
Web Push, MCP), run in a thread of the deadlines worker (`manage.py serve` gives it
`GATEWAY_CLOCK=true` with the beat role; gateway.celery starts it once the worker is ready).

Each job is its Celery task, run when it falls due: in this process (`Task.apply`: the same
signals as a task the worker takes, no broker hop) when its task belongs on the deadlines
queue (the sweeper, the MCP calls' sweep), else sent to its queue as beat did, so the
channels' rounds (email, webhooks, Slack, Web Push) keep to the run workers and never hold a
deadline's own task back behind them in this process. The sweeper falls due when agents.due
says: every SWEEP_INTERVAL_SECONDS while anything is in motion, else at the next stored due
time, at most SWEEP_IDLE_SECONDS away. The channels' rounds run at their intervals while the
gateway is busy (something in motion, or an event newer than at the last round), else
IDLE_ROUNDS idle sleeps apart (a minute): their nudges send what is new and each retry is a
task of its own, so a round only catches up on what a nudge or a task missed. With nothing in
motion and nothing due, the sweeper's run is only agents.due's look at when it next is; and
while the clock sleeps it reads the newest event's id every SWEEP_INTERVAL_SECONDS, so a run
started or a request raised meanwhile brings every job forward. Between
jobs the thread sleeps, so an idle gateway does not wake several times a second (bench/
footprint.py). It replaced Celery beat and its process: beat sent four tasks a second, each a
broker message, whatever there was to do.

One clock runs the jobs at a time, on any number of machines: it holds the beat lease
(infra.beat_lease), renewed every third of BEAT_LEASE_SECONDS; a clock that dies or hangs
loses it, and a waiting one takes over. The jobs stay idempotent all the same (conditional
updates, agents.deadlines): a clock paused in the middle of a round longer than the lease
may finish that round after another took over, before it finds the lease gone."""

import contextlib
import logging
import os
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from django.apps import apps
from django.conf import settings
from django.db import connections
from redis.exceptions import RedisError

from agents import due
from infra import beat_lease

log = logging.getLogger(__name__)

# A fork of this process waits for the job the clock is running. Under the prefork pool the
# worker forks a new child when one ends (a killed child, max-tasks-per-child), from its main
# thread, while this thread may be importing a module a job loads where it is used (issue
# 42's lighter workers): the child would inherit that module's import lock held by a thread
# it does not have, and hang at its first import of the module (CI: a child stuck forever in
# `from mcp_gateway import forward` after the sweeper had expired an MCP call). Python
# re-creates only its global import lock in a child, not a module's. Reentrant: a job that
# forks (a subprocess) does not wait for itself.
_job = threading.RLock()
_guarding = False


def _renew_in_child() -> None:
    global _job
    _job = threading.RLock()


def guard_forks() -> None:
    """Make this process's forks wait for the clock's job (once per process)."""
    global _guarding
    if _guarding:
        return
    _guarding = True
    os.register_at_fork(
        before=lambda: _job.acquire(),
        after_in_parent=lambda: _job.release(),
        after_in_child=_renew_in_child,
    )


@contextlib.contextmanager
def running_job() -> Iterator[None]:
    """Held while the clock runs its jobs: no fork of this process happens meanwhile."""
    with _job:
        yield


# Taking, losing or waiting for the lease is said at INFO whatever the worker's level (serve
# asks for warnings): an operator looks for the holder in the log.
log.setLevel(logging.INFO)

SWEEP = "sweep"
# Idle, the channels' rounds come this many idle sleeps apart (a minute by default).
IDLE_ROUNDS = 6


@dataclass
class Job:
    name: str
    task: str
    every: float
    here: bool  # run in this process, else sent to its queue
    # While rows of this model match this filter, the job keeps to its busy interval.
    busy_while: tuple[str, dict[str, Any]] | None = None
    due: float = 0.0  # time.monotonic() at which it runs next; 0: at once

    def has_work_left(self) -> bool:
        """A row of `busy_while` exists: a delivery still to make, a call being made."""
        if self.busy_while is None:
            return False
        label, where = self.busy_while
        try:
            return apps.get_model(label).objects.filter(**where).exists()
        except Exception:
            log.exception("the clock could not read %s; it keeps %s busy", label, self.name)
            return True


def _holder() -> str | None:
    try:
        return beat_lease.holder()
    except RedisError:
        return "unknown, Redis does not answer"


class Clock:
    def __init__(self, app: Any) -> None:
        self.app = app
        routes = settings.CELERY_TASK_ROUTES
        self.jobs = [
            Job(
                name,
                job["task"],
                float(job["every"]),
                here=routes.get(job["task"], {}).get("queue") == settings.CELERY_DEADLINE_QUEUE,
                busy_while=job.get("busy_while"),
            )
            for name, job in settings.CLOCK_JOBS.items()
        ]
        self.idle = max(float(settings.SWEEP_IDLE_SECONDS), float(settings.SWEEP_INTERVAL_SECONDS))
        self.lease = beat_lease.lease()
        self.name = beat_lease.own_name()
        self.holding: bool | None = None
        # Renewed three times per lease: a slow round or two does not lose it.
        self.renew_every = settings.BEAT_LEASE_SECONDS / 3
        self.renew_at = 0.0
        self.newest_event = -1
        self.watch_every = float(settings.SWEEP_INTERVAL_SECONDS)
        self.watch_at = 0.0
        self.stopping = threading.Event()
        self.thread = threading.Thread(target=self._run, name="clock", daemon=True)

    def start(self) -> None:
        guard_forks()
        self.thread.start()

    def stop(self, timeout: float = 10.0) -> None:
        """Stop after the job that runs, and give the lease back."""
        self.stopping.set()
        self.thread.join(timeout)

    # The loop ------------------------------------------------------------------------------

    def _run(self) -> None:
        try:
            while not self.stopping.is_set():
                try:
                    self._renew_if_due()
                    wake = self.renew_at
                    if self.holding:
                        with running_job():
                            self._round(time.monotonic())
                        wake = min(wake, self.watch_at, *(job.due for job in self.jobs))
                except Exception:
                    # Whatever it was (Redis or the database away), the clock goes on: a
                    # thread that ended here would leave the deadlines to nobody.
                    log.exception("the clock's round failed; it tries again in a second")
                    wake = time.monotonic() + 1.0
                self.stopping.wait(max(wake - time.monotonic(), 0.0))
        finally:
            self._release()
            connections.close_all()  # this thread's own

    def _renew_if_due(self) -> None:
        """Take or renew the lease when a third of it has passed; also between two jobs of a
        round, so a long sweep (a backlog of deadlines) does not outlast it."""
        now = time.monotonic()
        if now >= self.renew_at:
            self._take()
            self.renew_at = now + self.renew_every

    def _take(self) -> None:
        held = self.lease.take()
        if held != self.holding:
            if held:
                log.info("beat lease taken by %s: this clock runs the periodic work", self.name)
            else:
                log.info("beat lease not held by %s (holder: %s): it waits", self.name, _holder())
            self.holding = held

    def _release(self) -> None:
        if self.holding:
            # Released, not left to run out: a waiting clock takes over at its next renewal.
            self.lease.release()
            log.info("beat lease released by %s", self.name)
        self.holding = False

    def _round(self, now: float) -> None:
        fresh = False
        if now >= self.watch_at:
            # Every SWEEP_INTERVAL_SECONDS, one read: the newest event's id. A new one (a run
            # started, a request raised with its ladder, a grant made) brings every job
            # forward, the sweeper first, which plans again from what is stored now.
            self.watch_at = now + self.watch_every
            fresh = self._new_events()
            if fresh:
                for job in self.jobs:
                    job.due = min(job.due, now)
        due_jobs = [job for job in self.jobs if job.due <= now]
        if not due_jobs:
            return
        try:
            moving = due.in_motion()
        except Exception:
            log.exception("the clock could not read the gateway's state; it runs every job")
            moving = True
        busy = moving or self._new_events() or fresh
        if busy:
            # Woken from idle: every round at its own interval again, from its last run.
            for job in self.jobs:
                job.due = min(job.due, now + job.every)
        for job in due_jobs:
            self._renew_if_due()
            if self.stopping.is_set() or not self.holding:
                return
            if job.name == SWEEP:
                if self._sweep(job, moving) and not busy and self._new_events():
                    # What it applied (a reminder, an escalation, a deadline) made events: the
                    # channels' rounds go at once (the email of an escalation, say), not a
                    # minute later.
                    busy = True
                    for other in self.jobs:
                        if other is not job:
                            other.due = min(other.due, now)
                continue
            self._apply(job)
            # Idle, a round only catches up on what a nudge missed: its retries are tasks of
            # their own (agents.delivery.outbox, send_retries). A delivery left pending (its
            # worker died mid-attempt) keeps the round busy until it is made.
            idle = not busy and not job.has_work_left()
            job.due = now + (max(job.every, self.idle * IDLE_ROUNDS) if idle else job.every)
        self._give_back()

    def _sweep(self, job: Job, moving: bool) -> bool:
        """The sweeper; with nothing in motion, only if something is due, else its look at
        when something next is (agents.due: a few indexed reads, not the sweep's). Whether
        it swept."""
        found = self._apply(job, when_due=not moving)
        seconds = found.get("idle_for") if isinstance(found, dict) else None
        swept = seconds is None
        if seconds is None:
            try:
                seconds = due.plan()[0]
            except Exception:
                log.exception("the clock could not read when the sweeper is next due")
                seconds = job.every
        job.due = time.monotonic() + seconds
        return swept

    def _new_events(self) -> bool:
        try:
            newest = due.last_event_id()
        except Exception:
            log.exception("the clock could not read the newest event")
            return True
        if newest == self.newest_event:
            return False
        self.newest_event = newest
        return True

    def _apply(self, job: Job, **kwargs: Any) -> Any:
        """The job's task run here (its result), or sent to its queue (None)."""
        try:
            if job.here:
                return self.app.tasks[job.task].apply(kwargs=kwargs).result
            self.app.tasks[job.task].apply_async(kwargs=kwargs, declare=[])
        except Exception:
            # Task.apply keeps a task's own error in its result (Celery logs it); this is the
            # clock failing to run or send it at all (the next round tries again).
            log.exception("the clock could not run %s", job.task)
        return None

    @staticmethod
    def _give_back() -> None:
        # As after a task (gateway.celery.give_back): a broken connection is dropped, the rest
        # kept for the next round.
        for conn in connections.all(initialized_only=True):
            conn.close_if_unusable_or_obsolete()
