"""Sending work to the Celery workers once the caller's transaction commits (invariant 1).

Tasks are looked up by name in the Celery app, not imported: this module imports nothing of
the engine, so the engine and the actions may enqueue the tasks (agents.tasks) that call
them. agents.apps imports agents.tasks when Django starts, so every process has them.
"""

import functools
import logging
from typing import Any
from uuid import UUID

from celery import current_app
from django.db import transaction

log = logging.getLogger(__name__)

START_THREAD = "agents.tasks.start_thread"
RESUME_THREAD = "agents.tasks.resume_thread"
RUN_INSTANCE = "agents.tasks.run_instance"


def enqueue_thread(thread_id: UUID, task: str = RESUME_THREAD) -> None:
    """Send the thread to a worker once the caller's transaction commits."""
    transaction.on_commit(functools.partial(send, current_app.tasks[task], str(thread_id)))


def enqueue_instance(frame_id: int) -> None:
    """Send an agent instance's lane to a worker once the caller's transaction commits."""
    transaction.on_commit(functools.partial(send, current_app.tasks[RUN_INSTANCE], str(frame_id)))


def send(task: Any, *args: Any) -> None:
    """Enqueue a task whose work is already stored. The broker being away must not turn a
    committed change into an error answer: the row says the thread is runnable, and the
    sweeper enqueues it again (agents.deadlines.requeue_stalled) once the broker is back."""
    try:
        # No queue declared at each send (Celery's default): a task goes to its queue by name
        # (the default exchange), which needs no binding, and kombu's check of its cache of
        # declared queues copied the queue each time, a large part of the publish
        # (bench/README.md). The workers declare their queues as they start.
        task.apply_async(args, declare=[])
    except Exception:
        log.warning(
            "could not enqueue %s%s; the sweeper will enqueue it again",
            task.name,
            args,
            exc_info=True,
        )
