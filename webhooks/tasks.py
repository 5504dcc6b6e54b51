"""Celery tasks: fan events out, send one delivery, and the sweep that catches up on both."""

from celery import shared_task
from django.db import InterfaceError, OperationalError

from webhooks import fanout, outbox

TASK_OPTIONS = {
    "acks_late": True,
    "reject_on_worker_lost": True,
    "ignore_result": True,
    # A busy SQLite file, a dropped connection, a deadlock: tried again. A delivery whose POST
    # went out before the error may go out again; receivers dedupe on webhook-id.
    "autoretry_for": (OperationalError, InterfaceError),
    "retry_backoff": 0.2,
    "max_retries": 5,
}


@shared_task(**TASK_OPTIONS)
def fan_out() -> int:
    """Give the settled events after the cursor their deliveries (webhooks.fanout)."""
    return fanout.fan_out_all()


@shared_task(**TASK_OPTIONS)
def deliver(delivery_id: int, token: str) -> str:
    """Attempt one delivery; a duplicate, or one for a delivery that is done, does nothing."""
    return outbox.outbox.send(delivery_id, token)


@shared_task(ignore_result=True, expires=5)
def sweep() -> dict[str, int]:
    """Driven by beat: fan out what no nudge did, then enqueue the deliveries that are due
    (retries, lost tasks, attempts whose worker died)."""
    return {"fanned_out": fanout.fan_out_all(), "enqueued": outbox.enqueue_due()}
