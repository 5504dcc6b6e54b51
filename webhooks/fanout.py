"""The fan-out: every committed Event becomes a Delivery row for each receiver that wants it.

Durable by a cursor, not by the wake-up: the Cursor row says how far the Event table has been
read, and one transaction creates a batch's deliveries and moves the cursor past it. A crash
between an event's commit and the fan-out loses nothing (the next run reads from the cursor),
and a run that dies midway rolls back and leaves the cursor where it was. Runs come from
`nudge` (after each transaction that records events commits, agents.events.committed) and from
beat's sweep every WEBHOOKS_SWEEP_INTERVAL_SECONDS, which catches whatever a nudge missed.

Event ids can commit out of order on PostgreSQL, so the cursor never steps over a missing id
until the gap has settled (agents.cursor); a run stopped by a gap is finished by a later
one.
"""

import logging
import threading
import time
import uuid
from datetime import datetime
from typing import Any

from celery import current_app
from django.db import transaction
from django.db.models import Value
from django.utils import timezone

from a2a_server import notifications
from a2a_server.models import PushNotificationConfig
from agents.cursor import locked_position, settled_read
from agents.models import Event
from webhooks import queue
from webhooks.models import Cursor, Delivery, Subscription

log = logging.getLogger(__name__)

BATCH = 500
CURSOR = "events"
# Nudges from one process are coalesced: at most one fan-out task per NUDGE_DELAY, run that
# long after the first, so a busy engine sends a few tasks a second, not one per commit.
NUDGE_DELAY = 0.1

_nudge_due = 0.0
_nudge_lock = threading.Lock()
# Whether anything can receive deliveries is read at most once per RECEIVERS_TTL per process:
# a busy worker commits many times a second, and each nudge asked PostgreSQL again
# (bench/README.md). A receiver added meanwhile misses at most that long of
# nudges; beat's sweep, every WEBHOOKS_SWEEP_INTERVAL_SECONDS, fans its events out anyway.
RECEIVERS_TTL = 1.0
_receivers: tuple[float, bool] | None = None  # (when read, answer)


def nudge(**kwargs: Any) -> None:
    """After a commit that recorded events: have a worker fan them out shortly. Never raises:
    a broker that is away delays the deliveries until the sweep, it fails nothing."""
    global _nudge_due
    now = time.monotonic()
    with _nudge_lock:
        if now < _nudge_due:
            return
        _nudge_due = now + NUDGE_DELAY
    try:
        if not _receivers_known():
            # Nobody to deliver to: no task (one per commit, nearly, on a busy gateway). The
            # sweep still moves the cursor; a receiver added later gets events from then on.
            return
        # By name, as webhooks.queue.enqueue sends.
        current_app.send_task("webhooks.tasks.fan_out", countdown=NUDGE_DELAY)
    except Exception:
        log.warning("could not enqueue the webhooks fan-out; the sweep will run it", exc_info=True)


def _receivers_known() -> bool:
    """receivers_exist(), as read within the last RECEIVERS_TTL by this process."""
    global _receivers
    now = time.monotonic()
    known = _receivers
    if known is None or now - known[0] >= RECEIVERS_TTL:
        known = _receivers = (now, receivers_exist())
    return known[1]


def forget_receivers(**kwargs: Any) -> None:
    """A subscription or push config saved or deleted in this process: read again next time."""
    global _receivers
    _receivers = None


def receivers_exist() -> bool:
    """Is there anything a fan-out could deliver to: an enabled subscription or an A2A push
    config? (One statement, made at most once per NUDGE_DELAY per process.)"""
    subscriptions = Subscription.objects.filter(enabled=True)
    return (
        PushNotificationConfig.objects.annotate(any=Value(1))
        .values("any")
        .union(subscriptions.annotate(any=Value(1)).values("any"), all=True)
        .exists()
    )


def _cursor() -> Cursor:
    """The cursor row, locked for this transaction (events from before the fan-out ran have
    no receivers to go to)."""
    row: Cursor = locked_position(Cursor, CURSOR)
    return row


def _read(after: int) -> list[dict[str, Any]]:
    return list(
        Event.objects.filter(id__gt=after)
        .order_by("id")
        .values("id", "type", "thread_id", "created_at", "thread__agent__name")[:BATCH]
    )


def _settled(after: int) -> tuple[list[dict[str, Any]], bool]:
    return settled_read(after, _read, _id_and_time)


def _id_and_time(row: dict[str, Any]) -> tuple[int, datetime]:
    return row["id"], row["created_at"]


def deliveries_for(rows: list[dict[str, Any]], now: datetime, token: str) -> list[Delivery]:
    """The Delivery rows for these events: one per enabled subscription that wants the event,
    and one per A2A push config of the event's thread when the event changes the task's
    state."""
    subscriptions = list(Subscription.objects.filter(enabled=True))
    threads = {r["thread_id"] for r in rows if r["thread_id"] and notifications.pushed(r["type"])}
    configs: dict[Any, list[PushNotificationConfig]] = {}
    if threads:
        for config in PushNotificationConfig.objects.filter(thread_id__in=threads):
            configs.setdefault(config.thread_id, []).append(config)
    made = []
    common = {"next_attempt_at": now, "lock_token": token, "locked_until": now + queue.QUEUED_GRACE}
    for r in rows:
        for s in subscriptions:
            if s.wants(r["type"], r["thread__agent__name"], r["created_at"]):
                made.append(
                    Delivery(
                        event_id=r["id"],
                        subscription=s,
                        webhook_id=f"msg_{r['id']}_{s.id.hex}",
                        **common,
                    )
                )
        if notifications.pushed(r["type"]):
            for c in configs.get(r["thread_id"], []):
                made.append(
                    Delivery(
                        event_id=r["id"],
                        push_config=c,
                        webhook_id=f"a2a_{r['id']}_{c.id.hex}",
                        **common,
                    )
                )
    return made


def fan_out(now: datetime | None = None) -> tuple[int, bool]:
    """One step: the next batch of settled events gets its deliveries, and the cursor moves
    past it, in one transaction. Returns how many events it passed, and whether more may be
    read at once (a full batch)."""
    now = now or timezone.now()
    token = uuid.uuid4().hex
    with transaction.atomic():
        cursor = _cursor()
        rows, stopped = _settled(cursor.position)
        if not rows:
            return 0, False
        made = Delivery.objects.bulk_create(deliveries_for(rows, now, token))
        cursor.position = rows[-1]["id"]
        cursor.save(update_fields=["position", "updated_at"])
        if made:
            ids = [d.pk for d in made]
            transaction.on_commit(lambda: queue.enqueue(ids, token))
    return len(rows), len(rows) == BATCH and not stopped


def fan_out_all(now: datetime | None = None, steps: int = 20) -> int:
    """Steps until the settled events are all fanned out (or `steps` batches were)."""
    passed = 0
    for _ in range(steps):
        n, more = fan_out(now)
        passed += n
        if not more:
            break
    return passed
