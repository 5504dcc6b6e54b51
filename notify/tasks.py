"""Celery tasks for email: beat's sweep, and one send per email."""

import logging
from typing import Any

from celery import shared_task
from django.db import InterfaceError, OperationalError

from notify import outbox

log = logging.getLogger(__name__)


@shared_task(ignore_result=True, expires=5)
def dispatch() -> dict[str, Any]:
    """Driven by beat: new events to emails, and emails due again to the queue. On the
    default queue with the runs: a backlog of email never delays a deadline."""
    found = outbox.dispatch()
    if any(found.values()):
        log.info("notify: %s", found)
    return found


@shared_task(
    ignore_result=True,
    acks_late=True,
    reject_on_worker_lost=True,
    autoretry_for=(OperationalError, InterfaceError),
    retry_backoff=0.2,
    max_retries=5,
)
def send_email(email_id: int, token: str = "") -> bool:
    """Send one email; a duplicate delivery, or one for an email sent or held, does nothing.
    (A task sent before the lock existed carries no token.)"""
    return outbox.send(email_id, token=token)
