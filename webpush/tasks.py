"""Celery tasks for Web Push: fan events out to pushes, send one, and the sweep over both."""

from celery import shared_task

from agents.delivery.outbox import TASK_OPTIONS
from webpush import fanout, outbox


@shared_task(**TASK_OPTIONS)
def fan_out() -> int:
    """Give the settled events after the cursor their pushes (webpush.fanout)."""
    return fanout.fan_out_all()


@shared_task(**TASK_OPTIONS)
def deliver(push_id: int, token: str = "") -> str:
    """Attempt one push; one that is not due, done, or held by another task does nothing."""
    return outbox.send(push_id, token)


@shared_task(ignore_result=True, expires=5)
def sweep() -> dict[str, int]:
    """Driven by beat: fan out what no nudge did, and enqueue the pushes that are due."""
    return {"fanned_out": fanout.fan_out_all(), "enqueued": outbox.enqueue_due()}
