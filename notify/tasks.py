"""Celery tasks for email: the clock's round, and one send per email."""

import logging
from typing import Any

from celery import shared_task

from agents.delivery.outbox import TASK_OPTIONS
from notify import outbox

log = logging.getLogger(__name__)


@shared_task(ignore_result=True, expires=5)
def dispatch() -> dict[str, Any]:
    """Run by the clock: new events to emails, and emails due again to the queue. On the
    default queue with the runs: a backlog of email never delays a deadline."""
    found = outbox.dispatch()
    if any(found.values()):
        log.info("notify: %s", found)
    return found


@shared_task(**TASK_OPTIONS)
def send_email(email_id: int, token: str = "") -> bool:
    """Send one email; a duplicate delivery, or one for an email sent or held, does nothing.
    (A task sent before the lock existed carries no token.)"""
    return outbox.send(email_id, token=token)
