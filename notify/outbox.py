"""Email's deliveries: which events make which emails (one per person and group of
suspensions), and an email handed to Django's email backend.

The cursor over the Event table, the fan-out's transaction, the claim with a lease, the retry
schedule and the attempt log are the outbox's under the channels (agents.delivery): each Email
row is made in the transaction that moves the cursor, and its key makes it once per recipient
however often a batch is read; a sender killed between the send and the mark leaves the lease
to run out, and the row is sent once more.
"""

import logging
import smtplib
import time
from datetime import datetime, timedelta
from typing import Any

from django.conf import settings
from django.core.mail import EmailMessage

from agents.delivery import outbox as shared
from agents.delivery.fanout import BATCH, FanOut, Known, Nudge
from agents.delivery.outbox import Result
from agents.models import Event, Suspension
from notify import compose, routing
from notify.models import Cursor, Email, EmailAttempt

log = logging.getLogger(__name__)

CURSOR = "email"
KINDS = routing.KINDS
# How long a sender holds an email: far longer than an SMTP exchange (EMAIL_TIMEOUT per step).
CLAIM = timedelta(seconds=60)
# After the n-th failed attempt the next waits RETRY_WAITS[n-1]; then the email has failed.
RETRY_WAITS = (
    timedelta(seconds=30),
    timedelta(minutes=2),
    timedelta(minutes=10),
    timedelta(hours=1),
)


def emails_for(rows: list[dict[str, Any]], now: datetime, token: str) -> list[Email]:
    """The emails these events call for (agents.delivery.fanout's `make`)."""
    kinds = set(KINDS)
    if not routing.anyone_opted_in():
        # A new request's email goes only to those who opted in: with nobody opted in,
        # its events need no reading (most gateways; each read costs several queries).
        kinds.discard(Event.Type.AGENT_SUSPENDED)
    wanted = [r["id"] for r in rows if r["type"] in kinds and r["suspension_id"]]
    if not wanted:
        return []
    made: list[Email] = []
    keys: set[str] = set()
    for event in Event.objects.filter(id__in=wanted).select_related("suspension").order_by("id"):
        made.extend(_emails_for(event, now, keys))
    return made


def _emails_for(event: Event, now: datetime, keys: set[str]) -> list[Email]:
    s = event.suspension
    route = routing.route(event)
    kind, key = route.kind, route.key
    if key in keys or Email.objects.filter(key=key).exists():
        return []  # another call of the group (in this batch or an earlier one) made it
    keys.add(key)
    # One email per address, whoever holds it.
    recipients: dict[str, tuple[Any, str]] = {}
    for user, why in route.people():
        recipients.setdefault(user.email.lower(), (user, why))
    if not recipients:
        return []
    group = list(Suspension.objects.filter(group=s.group).order_by("created_at", "id"))
    texts = {why: compose.message(kind, group, event, now, why) for why, _ in route.audiences}
    return [
        Email(
            key=key,
            to=address,
            user=user,
            kind=kind,
            thread_id=s.thread_id,
            group=s.group,
            event=event,
            subject=texts[why][0],
            body=texts[why][1],
            next_attempt_at=now,
        )
        for address, (user, why) in recipients.items()
    ]


class Outbox(shared.Outbox):
    model = Email
    attempt_model = EmailAttempt
    attempt_of = "email"
    task = "notify.tasks.send_email"
    succeeded = Email.Status.SENT

    def lease(self) -> timedelta:
        return CLAIM

    def schedule(self) -> list[float]:
        return [wait.total_seconds() for wait in RETRY_WAITS]

    def held(self, email: Email) -> str:
        # Nothing left for a person to decide: every request of the group was decided, or
        # was ignored (closed for people, agents.decisions.ignore) after the email was made.
        open_requests = Suspension.objects.filter(
            group=email.group, status=Suspension.Status.PENDING, ignored_at__isnull=True
        )
        if open_requests.exists():
            return ""
        Email.objects.filter(pk=email.pk).update(status=Email.Status.SKIPPED)
        return Email.Status.SKIPPED

    def deliver(self, email: Email, now: datetime) -> Result:
        message = EmailMessage(
            subject=email.subject,
            body=email.body,
            from_email=settings.DEFAULT_FROM_EMAIL,
            to=[email.to],
            # RFC 3834: an automatic message; vacation responders do not answer it.
            headers={"Auto-Submitted": "auto-generated", "X-Gateway-Email": str(email.pk)},
        )
        try:
            message.send()
        except (smtplib.SMTPException, OSError) as e:
            return Result(False, error=f"{type(e).__name__}: {e}", permanent=refused_for_good(e))
        return Result(True)


def refused_for_good(error: Exception) -> bool:
    """Whether the SMTP server refused the email with a permanent reply (5xx, RFC 5321 4.2.1):
    sending it again would be refused again, so its retries end. A 4xx reply, a dropped
    connection or an unreachable server is transient."""
    if isinstance(error, smtplib.SMTPRecipientsRefused):
        # The one recipient's reply (an email here has one); every one refused for good.
        codes = [code for code, _ in error.recipients.values()]
        return bool(codes) and all(code >= 500 for code in codes)
    if isinstance(error, smtplib.SMTPResponseException):
        return error.smtp_code >= 500
    return False


# No jitter: a wait of RETRY_WAITS is what the reviewer's email is late by at most.
outbox = Outbox(jitter=lambda: 1.0)
enqueue = outbox.enqueue
enqueue_due = outbox.enqueue_due
fanning = FanOut(
    cursor=Cursor,
    model=Email,
    fields=("suspension_id",),
    make=emails_for,
    enqueue=enqueue,
    name=CURSOR,
)


def fan_out(now: datetime | None = None) -> tuple[int, list[int]]:
    """Make the emails the events after the cursor call for; returns how many events it read
    past and the new emails' ids, queued for sending once the cursor's move commits."""
    step = fanning.step(now)
    return step.passed, step.made


def send(pk: int, now: datetime | None = None, token: str = "") -> bool:
    """Send one email if it is still due and nobody else is sending it; True if sent."""
    box = outbox if now is None else Outbox(clock=lambda: now, jitter=lambda: 1.0)
    return box.send(pk, token) == "succeeded"


nudges = Nudge("notify.tasks.dispatch")
# Whether anyone can hear of a new request: read at most once a second per process.
anyone_known = Known(routing.anyone_opted_in)


def nudge(**kwargs: Any) -> None:
    """After a commit that recorded events: have a worker turn them into emails shortly, when
    anyone opted in. The clock's round catches up on what a nudge missed; an idle gateway's
    rounds are a minute apart (gateway.clock), and a request's email should not wait that."""
    nudges(anyone_known)


def dispatch(budget: float = 2.0) -> dict[str, Any]:
    """One sweep: new events to emails until caught up (or `budget` seconds), then the
    emails due again to the queue."""
    started = time.monotonic()
    made = 0
    while True:
        step = fanning.step()
        made += len(step.made)
        if step.passed < BATCH or time.monotonic() - started > budget:
            break
    return {"made": made, "requeued": enqueue_due()}
