"""Celery tasks: they take ids, re-read the database and return quietly when there is no work."""

import logging

from celery import shared_task
from django.db import OperationalError

from agents import actions
from agents.engine import engine

log = logging.getLogger(__name__)

TASK_OPTIONS = {
    "acks_late": True,
    "reject_on_worker_lost": True,
    "ignore_result": True,
    # A busy SQLite file or a dropped database connection: worth another try.
    "autoretry_for": (OperationalError,),
    "retry_backoff": 0.2,
    "max_retries": 5,
}


@shared_task(**TASK_OPTIONS)
def start_thread(thread_id: str) -> bool:
    """Run a new thread's first turn."""
    return engine.advance(thread_id)


@shared_task(**TASK_OPTIONS)
def resume_thread(thread_id: str) -> bool:
    """Resume a thread after a decision or a message; a duplicate delivery finds nothing to do."""
    return engine.advance(thread_id)


@shared_task(ignore_result=True, expires=5)
def sweep() -> dict[str, int]:
    """Driven by beat every second: apply deadlines, then re-enqueue stalled threads."""
    found = {"timed_out": actions.expire_overdue(), "requeued": actions.requeue_stalled()}
    if any(found.values()):
        log.info("sweep: %s", found)
    return found
