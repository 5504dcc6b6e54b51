"""The outbox: a channel's delivery rows claimed with a lease, sent by its transport, each
attempt logged, and retried on a schedule until one succeeds, a failure is permanent, or the
schedule runs out.

A delivery row (`Row`) carries its status (pending, succeeded, failed), its attempts, when the
next is due, a lock (a token and the lease's end) and its last error. A claim is a conditional
update, and the row count tells who won: the task given the row's token when it was enqueued,
or anyone once the lease has passed, takes it while it is pending and due; a worker killed
mid-attempt, or a task lost with its broker message, delays it but never loses it (the sweep,
`enqueue_due`, hands it out again). The attempt's row and the delivery's next state are
written in one transaction; a delivery another task took meanwhile (its lease ran out) gets
only the attempt's row. Tasks are sent by name (`celery.current_app.send_task`), with the
token: `<task>(pk, token)`.

A channel subclasses `Outbox` with its models (the deliveries, their attempts), its task's
name and schedule, and `deliver` (its transport's send: a `Result`, permanent or not).
"""

import logging
import random
import uuid
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any, ClassVar

from celery import current_app
from django.db import models, transaction
from django.db.models import F, Q
from django.utils import timezone

# A channel's fan-out and send tasks are declared with the engine's options, named here for
# the channels; the transport's own failures are the outbox's to retry and log.
from agents.task_options import TASK_OPTIONS as TASK_OPTIONS

log = logging.getLogger(__name__)

# A delivery task that has not started this long after it was enqueued (a lost message, a
# crash before the enqueue) is enqueued again by the sweep (Outbox.enqueue_due).
QUEUED_GRACE = timedelta(seconds=60)
ERROR_KEPT = 2000


@dataclass(frozen=True)
class Result:
    """What a transport's send came to. A failure that is `permanent` (the receiver will say
    the same again) ends the retries; `retry_after` is the least wait, in seconds, before the
    next attempt (a rate limit's Retry-After)."""

    succeeded: bool
    status_code: int | None = None
    response_ms: int | None = None
    error: str = ""
    body: str = ""
    permanent: bool = False
    retry_after: float = 0.0


class Outbox:
    """Sends one channel's deliveries. The clock and the jitter are injectable; by default the
    real ones. Outcomes: "succeeded", "retry", "dead-lettered" (failed for good), "taken" (not
    this call's), "superseded" (another task took it meanwhile), or what `held` says."""

    model: ClassVar[type[models.Model]]
    # The attempt log's model, and the name of its foreign key to the delivery.
    attempt_model: ClassVar[type[models.Model]]
    attempt_of: ClassVar[str] = "delivery"
    task: ClassVar[str]  # the send task's name: task(pk, token)
    # After a failed attempt, the retry is sent at once with the wait as its countdown, so it
    # goes on time while the clock's rounds are a minute apart (an idle gateway: gateway.clock);
    # the round sends it too once due, if that task is lost (its claim takes it once).
    send_retries: ClassVar[bool] = True
    # The status of a delivery that went (email's rows say "sent").
    succeeded: ClassVar[str] = "succeeded"

    def __init__(
        self,
        clock: Callable[[], datetime] = timezone.now,
        jitter: Callable[[], float] = lambda: random.uniform(0.75, 1.25),
    ) -> None:
        self.clock = clock
        self.jitter = jitter

    # What a channel says.

    def lease(self) -> timedelta:
        """How long an attempt holds its delivery: longer than the transport may take."""
        raise NotImplementedError

    def schedule(self) -> Sequence[float]:
        """Seconds before each retry; a delivery fails after len(schedule) + 1 attempts."""
        raise NotImplementedError

    def load(self, pk: int) -> Any:
        """The claimed delivery, with what `deliver` reads."""
        return self.model._default_manager.get(pk=pk)

    def held(self, d: Any) -> str:
        """Why the claimed delivery is not sent now (its lock is let go: it waits, pending, or
        the channel has closed it); "" to send it."""
        return ""

    def deliver(self, d: Any, now: datetime) -> Result:
        """The transport's send of one delivery."""
        raise NotImplementedError

    def log(self, d: Any, number: int, started_at: datetime, result: Result) -> None:
        """The attempt's row in the channel's attempt log: what of the result its model
        has columns for."""
        values = {
            "number": number,
            "started_at": started_at,
            "succeeded": result.succeeded,
            "error": result.error,
            "status_code": result.status_code,
            "response_ms": result.response_ms,
            "response_body": result.body,
        }
        columns = {f.name for f in self.attempt_model._meta.get_fields()}
        kept = {name: value for name, value in values.items() if name in columns}
        self.attempt_model._default_manager.create(**{self.attempt_of: d}, **kept)

    def failures(self, d: Any) -> int:
        """The delivery's failed attempts so far: its place in the schedule."""
        return int(d.attempts)

    def fields(self, d: Any, result: Result) -> dict[str, Any]:
        """The channel's own columns written with the attempt's outcome."""
        return {}

    def due(self) -> Q:
        """Which due deliveries the sweep hands out (all, unless the channel says)."""
        return Q()

    def ending(self, d: Any) -> None:
        """In the transaction that fails a delivery for good, before its row is written: the
        locks the channel's `ended` takes, in the order another writer takes them."""

    def ended(self, d: Any, now: datetime, result: Result) -> None:
        """A delivery failed for good, in that transaction."""

    # The mechanism.

    def enqueue(self, ids: list[int], token: str, countdown: float | None = None) -> None:
        """Send deliveries to the workers. The broker being away fails nothing: the rows are
        pending, and the sweep enqueues them again once their lock (QUEUED_GRACE) has
        passed. By name: sending does not finalize the Celery app in a web process."""
        for pk in ids:
            try:
                current_app.send_task(self.task, args=(pk, token), countdown=countdown)
            except Exception:
                log.warning(
                    "could not enqueue %d deliveries (%s); the sweep will enqueue them again",
                    len(ids),
                    self.task,
                    exc_info=True,
                )
                return

    def enqueue_due(self, now: datetime | None = None, limit: int = 500) -> int:
        """Enqueue the pending deliveries whose attempt is due and that nobody holds: retries,
        and deliveries whose task was lost or whose worker died mid-attempt. How many."""
        now = now or self.clock()
        pending = self.model._default_manager.filter(status="pending")
        due = (
            pending.filter(next_attempt_at__lte=now)
            .filter(_free(now))
            .filter(self.due())
            .order_by("next_attempt_at")
            .values_list("pk", flat=True)[:limit]
        )
        ids = list(due)
        if not ids:
            return 0
        token = uuid.uuid4().hex
        pending.filter(pk__in=ids).filter(_free(now)).update(
            lock_token=token, locked_until=now + QUEUED_GRACE
        )
        rows = self.model._default_manager.filter(pk__in=ids, lock_token=token)
        taken = list(rows.values_list("pk", flat=True))
        self.enqueue(taken, token)
        return len(taken)

    def claim(self, pk: int, token: str, now: datetime) -> str | None:
        """The lock of this attempt, if the delivery is pending and due and this call took
        it (it was given the token, or the lease has passed)."""
        mine = uuid.uuid4().hex
        # A task without a token (a retry's, or one sent before a lock existed) takes only
        # a free delivery.
        takes = _free(now) | Q(lock_token=token) if token else _free(now)
        claimed = (
            self.model._default_manager.filter(pk=pk, status="pending", next_attempt_at__lte=now)
            .filter(takes)
            .update(lock_token=mine, locked_until=now + self.lease())
        )
        return mine if claimed == 1 else None

    def send(self, pk: int, token: str = "") -> str:
        """Attempt the delivery if it is still due and this task may take it; the outcome."""
        now = self.clock()
        mine = self.claim(pk, token, now)
        if mine is None:
            return "taken"  # done, not due, or another task holds it
        d = self.load(pk)
        reason = self.held(d)
        if reason:
            self.model._default_manager.filter(pk=pk, lock_token=mine).update(
                lock_token="", locked_until=None
            )
            return reason
        return self.record(d, mine, now, self.deliver(d, now))

    def record(self, d: Any, mine: str, started_at: datetime, result: Result) -> str:
        """The attempt in the log, and the delivery's next state, in one transaction. If the
        lease ran out and another task took the delivery, only the attempt is written."""
        now = self.clock()
        schedule = self.schedule()
        failures = self.failures(d) + (0 if result.succeeded else 1)
        fields: dict[str, Any] = {
            "attempts": F("attempts") + 1,
            "last_error": result.error[:ERROR_KEPT],
            "lock_token": "",
            "locked_until": None,
            **self.fields(d, result),
        }
        wait = 0.0
        if result.succeeded:
            outcome = "succeeded"
            fields.update(status=self.succeeded, finished_at=now, next_attempt_at=None)
        elif not result.permanent and failures <= len(schedule):
            outcome = "retry"
            wait = max(schedule[failures - 1] * self.jitter(), result.retry_after)
            fields.update(next_attempt_at=now + timedelta(seconds=wait))
        else:
            outcome = "dead-lettered"
            fields.update(status="failed", finished_at=now, next_attempt_at=None)
        rows = self.model._default_manager
        with transaction.atomic():
            if outcome == "dead-lettered":
                self.ending(d)
            n = rows.filter(pk=d.pk, lock_token=mine, status="pending").update(**fields)
            # A delivery deleted meanwhile (its receiver went) logs nothing.
            if n == 1 or rows.filter(pk=d.pk).exists():
                self.log(d, d.attempts + 1, started_at, result)
            if n != 1:
                return "superseded"
            if outcome != "succeeded":
                log.warning(
                    "%s %s, attempt %d (%s): %s",
                    self.model.__name__,
                    d.pk,
                    d.attempts + 1,
                    outcome,
                    result.error,
                )
            if outcome == "dead-lettered":
                self.ended(d, now, result)
        if outcome == "retry" and self.send_retries:
            self.enqueue([d.pk], "", countdown=wait)
        return outcome


def _free(now: datetime) -> Q:
    return Q(locked_until__isnull=True) | Q(locked_until__lte=now)
