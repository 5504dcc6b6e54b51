"""Handing deliveries to the workers: the task sent by name, and how long a queued one waits."""

import logging
from datetime import timedelta

from celery import current_app

log = logging.getLogger(__name__)

# A delivery task that has not started this long after it was enqueued (a lost message, a
# crash before the enqueue) is enqueued again by the sweep (webhooks.outbox.enqueue_due).
QUEUED_GRACE = timedelta(seconds=60)


def enqueue(ids: list[int], token: str) -> None:
    """Send deliveries to the workers. The broker being away fails nothing: the rows are
    pending, and the sweep enqueues them again once their lock (QUEUED_GRACE) has passed."""
    for pk in ids:
        try:
            # By name: sending does not finalize the Celery app in a web process (whose
            # on_after_finalize hook wants every task module imported first).
            current_app.send_task("webhooks.tasks.deliver", args=(pk, token))
        except Exception:
            log.warning(
                "could not enqueue %d deliveries; the sweep will enqueue them again",
                len(ids),
                exc_info=True,
            )
            return
