"""The fan-out: the settled events after a channel's cursor become its delivery rows.

Durable by a cursor, not by the wake-up: the cursor row says how far the Event table has been
read, and one transaction creates a batch's deliveries and moves the cursor past it. A crash
between an event's commit and the fan-out loses nothing (the next run reads from the cursor),
and a run that dies midway rolls back and leaves the cursor where it was. Event ids can commit
out of order on PostgreSQL, so the cursor never steps over a missing id until the gap has
settled (agents.cursor); a run stopped by a gap is finished by a later one.

A channel gives what it reads of each event and what deliveries a batch of them makes
(`FanOut.make`); runs come from its `Nudge` (after a commit that recorded events,
agents.events.committed) and from the clock's round, which catches whatever a nudge missed.
"""

import logging
import threading
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime
from typing import Any, NamedTuple

from celery import current_app
from django.db import models, transaction
from django.utils import timezone

from agents.cursor import locked_position, settled_read
from agents.models import Event

log = logging.getLogger(__name__)

BATCH = 500
# Nudges from one process are coalesced: at most one fan-out task per DELAY, run that long
# after the first, so a busy engine sends a few tasks a second, not one per commit.
DELAY = 0.1

Row = dict[str, Any]


class Step(NamedTuple):
    """What one step did: the events it passed, whether more may be read at once (it read a
    full batch), and the ids of the deliveries it made."""

    passed: int
    more: bool
    made: list[int]


@dataclass(frozen=True)
class FanOut:
    """One channel's fan-out. `cursor`: its cursor's model (a name and a position); `fields`:
    what `make` reads of each event besides its id, type and created_at; `make(rows, now,
    token)`: the unsaved rows of `model` the events call for (`token` is the lock the outbox's
    claim accepts, agents.delivery.outbox); `enqueue(ids, token)`: the new rows to the workers,
    once the transaction commits."""

    cursor: type[models.Model]
    model: type[models.Model]
    fields: tuple[str, ...]
    make: Callable[[list[Row], datetime, str], list[Any]]
    enqueue: Callable[[list[int], str], None]
    name: str = "events"
    batch: int = BATCH

    def read(self, after: int) -> list[Row]:
        # Every type is read, not only the channel's: a filtered read would show the ids it
        # leaves out as gaps, each waiting to settle.
        rows = Event.objects.filter(id__gt=after).order_by("id")
        return list(rows.values("id", "type", "created_at", *self.fields)[: self.batch])

    def step(self, now: datetime | None = None) -> Step:
        """The next batch of settled events gets its deliveries and the cursor moves past it,
        in one transaction."""
        now = now or timezone.now()
        token = uuid.uuid4().hex
        # Most sweeps find nothing new: say so without a write transaction (on SQLite every
        # transaction here takes the database's write lock).
        rows = self.cursor._default_manager.filter(name=self.name)
        at = rows.values_list("position", flat=True).first()
        if at is not None and not Event.objects.filter(id__gt=at).exists():
            return Step(0, False, [])
        ids: list[int] = []
        with transaction.atomic():
            # Locked for this transaction; a new cursor starts at the newest settled event
            # (what came before the channel was on has nowhere to go).
            cursor = locked_position(self.cursor, self.name)
            events, stopped = settled_read(cursor.position, self.read, _id_and_time)
            if not events:
                return Step(0, False, [])
            made = self.model._default_manager.bulk_create(self.make(events, now, token))
            cursor.position = events[-1]["id"]
            cursor.save(update_fields=["position", "updated_at"])
            if made:
                ids = [d.pk for d in made]
                transaction.on_commit(lambda: self.enqueue(ids, token))
        return Step(len(events), len(events) == self.batch and not stopped, ids)

    def all(self, now: datetime | None = None, steps: int = 20) -> int:
        """Steps until the settled events are all fanned out (or `steps` batches were)."""
        passed = 0
        for _ in range(steps):
            step = self.step(now)
            passed += step.passed
            if not step.more:
                break
        return passed


def _id_and_time(row: Row) -> tuple[int, datetime]:
    return row["id"], row["created_at"]


class Known:
    """Whether a channel has anything to deliver to (`read()`), read at most once per `ttl`
    seconds per process: a busy worker commits many times a second, and each nudge asked the
    database again (bench/HISTORY.md, webhooks' fourth round). A receiver added in another
    process misses at most that long of nudges; the channel's sweep fans its events out anyway.
    `forget` (connected to the receivers' save and delete signals) reads again next time."""

    def __init__(self, read: Callable[[], bool], ttl: float = 1.0) -> None:
        self.read = read
        self.ttl = ttl
        self._known: tuple[float, bool] | None = None  # (when read, answer)

    def __call__(self) -> bool:
        now = time.monotonic()
        known = self._known
        if known is None or now - known[0] >= self.ttl:
            known = self._known = (now, bool(self.read()))
        return known[1]

    def forget(self, **kwargs: Any) -> None:
        self._known = None


class Nudge:
    """Sends a channel's fan-out task by name shortly after a commit, at most once per DELAY
    per process. Never raises: a broker that is away delays the deliveries until the sweep,
    it fails nothing."""

    def __init__(self, task: str, delay: float = DELAY) -> None:
        self.task = task
        self.delay = delay
        self.due = 0.0  # monotonic time before which a nudge sends nothing
        self._lock = threading.Lock()

    def __call__(self, wanted: Callable[[], bool] = lambda: True) -> None:
        """Send the task unless one went within DELAY, or `wanted()` (asked only then) says
        there is nothing to deliver to."""
        now = time.monotonic()
        with self._lock:
            if now < self.due:
                return
            self.due = now + self.delay
        try:
            if wanted():
                current_app.send_task(self.task, countdown=self.delay)
        except Exception:
            log.warning("could not enqueue %s; the sweep will run it", self.task, exc_info=True)
