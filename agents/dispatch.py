"""Sending work to the Celery workers once the caller's transaction commits (invariant 1).

Tasks are looked up by name in the Celery app, not imported: this module imports nothing of
the engine, so the engine and the actions may enqueue the tasks (agents.tasks) that call
them. agents.apps imports agents.tasks when Django starts, so every process has them.
"""

import contextlib
import functools
import logging
from collections.abc import Iterator
from contextvars import ContextVar
from datetime import datetime, timedelta
from typing import Any
from uuid import UUID

from celery import current_app
from django.db import transaction

log = logging.getLogger(__name__)

START_THREAD = "agents.tasks.start_thread"
RESUME_THREAD = "agents.tasks.resume_thread"
RUN_INSTANCE = "agents.tasks.run_instance"
EXPIRE_SUSPENSION = "agents.tasks.expire_suspension"
EXPIRE_INPUT = "agents.tasks.expire_input"
# A deadline's own task fires this long after it, so the clock has passed it for sure.
EXPIRY_MARGIN = timedelta(milliseconds=20)

# The runs the clock sends (a deadline's or an input's timeout, the sweeper's re-enqueues) go
# behind the ones a person or an agent is waiting on: the same queue, a lower priority. Redis
# keeps a list per priority step and a worker pops them in order, 0 (unset, everyone else's)
# first; the embedded broker's file names sort by it (infra.broker). 20,000 deadlines falling
# at once then no longer hold a person's approval back for minutes (bench/backlog.py).
UNATTENDED_PRIORITY = 9
_unattended: ContextVar[bool] = ContextVar("unattended", default=False)


@contextlib.contextmanager
def unattended() -> Iterator[None]:
    """Within it, the runs enqueued are the clock's: behind every other (UNATTENDED_PRIORITY)."""
    token = _unattended.set(True)
    try:
        yield
    finally:
        _unattended.reset(token)


def _later(task: Any, *args: Any) -> functools.partial[None]:
    if _unattended.get():
        return functools.partial(send, task, *args, priority=UNATTENDED_PRIORITY)
    return functools.partial(send, task, *args)


def enqueue_thread(thread_id: UUID, task: str = RESUME_THREAD) -> None:
    """Send the thread to a worker once the caller's transaction commits."""
    transaction.on_commit(_later(current_app.tasks[task], str(thread_id)))


def enqueue_instance(frame_id: int) -> None:
    """Send an agent instance's lane to a worker once the caller's transaction commits."""
    transaction.on_commit(_later(current_app.tasks[RUN_INSTANCE], str(frame_id)))


def at_deadline(task: str, pk: UUID, when: datetime) -> None:
    """Have `task` (EXPIRE_SUSPENSION, EXPIRE_INPUT) run for `pk` just after `when`, once the
    caller's transaction commits: for a deadline that may fall before the clock wakes up
    (agents.due). The stored time stays the truth (invariant 4): if this task is lost, the
    sweeper applies the deadline when it next runs."""
    transaction.on_commit(
        functools.partial(send, current_app.tasks[task], str(pk), eta=when + EXPIRY_MARGIN)
    )


def send(task: Any, *args: Any, priority: int | None = None, eta: datetime | None = None) -> None:
    """Enqueue a task whose work is already stored. The broker being away must not turn a
    committed change into an error answer: the row says the thread is runnable, and the
    sweeper enqueues it again (agents.deadlines.requeue_stalled) once the broker is back."""
    try:
        # No queue declared at each send (Celery's default): a task goes to its queue by name
        # (the default exchange), which needs no binding, and kombu's check of its cache of
        # declared queues copied the queue each time, a large part of the publish
        # (bench/README.md). The workers declare their queues as they start.
        if eta is not None:
            task.apply_async(args, declare=[], eta=eta)
        elif priority is None:
            task.apply_async(args, declare=[])
        else:
            task.apply_async(args, declare=[], priority=priority)
    except Exception:
        log.warning(
            "could not enqueue %s%s; the sweeper will enqueue it again",
            task.name,
            args,
            exc_info=True,
        )
