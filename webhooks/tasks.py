"""Celery tasks: fan events out, send one delivery, and the sweep that catches up on both."""

from celery import shared_task

from agents.delivery.outbox import TASK_OPTIONS
from webhooks import fanout, outbox


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
