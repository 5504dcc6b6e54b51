"""Celery tasks: they take ids, re-read the database and return quietly when there is no work."""

import logging
from datetime import timedelta
from typing import Any

from celery import shared_task
from django.conf import settings

from agents import cancelling, deadlines, due, grants, reminders, replies
from agents.dispatch import EXPIRY_MARGIN
from agents.engine import engine
from agents.reviewing import verdicts
from agents.task_options import TASK_OPTIONS
from infra import last_runs

log = logging.getLogger(__name__)


@shared_task(**TASK_OPTIONS)
def start_thread(thread_id: str) -> bool:
    """Run a new thread's first turn."""
    return engine.advance(thread_id)


@shared_task(**TASK_OPTIONS)
def resume_thread(thread_id: str) -> bool:
    """Resume a thread after a decision or a message; a duplicate delivery finds nothing to do."""
    return engine.advance(thread_id)


@shared_task(**TASK_OPTIONS)
def run_instance(frame_id: str) -> bool:
    """Run an agent instance (an `agent__<name>` call) on its own; a duplicate delivery, or
    one for an instance that finished or waits for a decision, finds nothing to do."""
    return engine.advance_instance(frame_id)


@shared_task(**TASK_OPTIONS)
def review_suspension(suspension_id: str) -> bool:
    """Ask a request's reviewing model and apply its answer (agents.reviewing.verdicts); a
    duplicate delivery, or one for a request decided meanwhile, finds nothing to do."""
    return verdicts.review(suspension_id)


@shared_task(ignore_result=True, expires=5)
def sweep(when_due: bool = False) -> dict[str, Any]:
    """Run by the clock (gateway.clock) when it falls due (agents.due): apply deadlines, then
    the reminders and escalations that have fallen due, then re-enqueue stalled threads.

    With `when_due` (the clock, when nothing is in motion) only if something is due; else it
    answers `{"idle_for": seconds}`, when it next is. A task all the same, so whatever holds
    tasks back (the tests' gate: tests/worker_gate.py) holds the look too.

    A deadline that falls before the next sweep also gets a task of its own, due at that
    moment, so it is applied on time rather than up to a sweep interval late (one raised with
    a timeout of SWEEP_IDLE_SECONDS or less got its task when it was raised:
    agents.dispatch.at_deadline). The stored expires_at stays the truth (invariant 4): if
    that task is lost, the next sweep applies it.
    """
    if when_due:
        seconds, moving = due.plan()
        if seconds > 0 and not moving:
            last_runs.mark("sweep")  # the sweeper looked: /readyz sees it alive
            return {"idle_for": seconds}
    found = {
        "timed_out": deadlines.expire_all_overdue(),
        # After the deadlines: a suspension whose deadline has passed gets no reminder.
        "ladder_steps": reminders.apply_ladder_steps(),
        "inputs_timed_out": replies.expire_inputs(),
        "requeued": deadlines.requeue_stalled(),
        # Standing grants whose lifetime passed or whose count was spent: GRANT_EXPIRED.
        "grants_ended": grants.expire_all(),
        # Cancels that waited for a tool whose worker stopped before it returned.
        "cancels_settled": cancelling.settle_abandoned(),
        # Requests whose reviewing model's answer can no longer come: said failed.
        "reviews_unanswered": verdicts.settle_unanswered(),
    }
    interval = timedelta(seconds=settings.SWEEP_INTERVAL_SECONDS)
    for pk, expires_at in deadlines.due_soon(within=interval):
        expire_suspension.apply_async((str(pk),), eta=expires_at + EXPIRY_MARGIN)
    if any(found.values()):
        log.info("sweep: %s", found)
    # After the work: /readyz and the metrics read when the sweeper last ran to the end.
    last_runs.mark("sweep")
    return found


@shared_task(ignore_result=True, expires=60)
def expire_suspension(suspension_id: str) -> int:
    """Apply one suspension's deadline, if it has passed and nobody decided first."""
    return deadlines.expire_overdue(only=suspension_id)


@shared_task(ignore_result=True, expires=60)
def expire_input(thread_id: str) -> int:
    """Apply one thread's input timeout, if it has passed and nobody answered first."""
    return replies.expire_inputs(only=thread_id)
