"""The options every Celery task of the gateway that changes rows is declared with: the
engine's (agents.tasks) and the channels' deliveries (agents.delivery.outbox, and the
webhooks, Slack and email tasks through it).

Acknowledged once run, so a worker killed mid-task leaves the task to another (invariant 3:
each one reads the database again and is safe to run twice), and tried again on the
database's transient errors: a busy SQLite file, a dropped connection, a cancelled statement,
a lock timeout or a deadlock (agents.runs.Run.reraises). What a step saved before such an
error is not run again; a delivery sent before it may go again, and its receiver dedupes (a
webhook's webhook-id, a Slack message kept per conversation).
"""

from typing import Any

from django.db import InterfaceError, OperationalError

TASK_OPTIONS: dict[str, Any] = {
    "acks_late": True,
    "reject_on_worker_lost": True,
    "ignore_result": True,
    "autoretry_for": (OperationalError, InterfaceError),
    "retry_backoff": 0.2,
    "max_retries": 5,
}
