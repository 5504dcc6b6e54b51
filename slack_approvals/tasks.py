"""Celery tasks: fan events out to Slack deliveries, send one, and the sweep over both."""

from celery import shared_task

from agents.delivery.outbox import TASK_OPTIONS
from slack_approvals import client, fanout, outbox


@shared_task(**TASK_OPTIONS)
def fan_out() -> int:
    """Give the settled events after the cursor their Slack deliveries (slack_approvals.fanout)."""
    return fanout.fan_out_all() if client.enabled() else 0


@shared_task(**TASK_OPTIONS)
def deliver(delivery_id: int, token: str = "") -> str:
    """Attempt one delivery; one that is not due, done, or held by another task does nothing.
    (A task sent before the lock existed carries no token.)"""
    return outbox.send(delivery_id, token)


@shared_task(ignore_result=True, expires=5)
def sweep() -> dict[str, int]:
    """Driven by beat: fan out what no nudge did, and enqueue the deliveries that are due."""
    if not client.enabled():
        return {}
    return {"fanned_out": fanout.fan_out_all(), "enqueued": outbox.enqueue_due()}
