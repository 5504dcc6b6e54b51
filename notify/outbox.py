"""From events to emails: read the Event table, make one Email row per person and group of
suspensions, and send each once.

fan_out keeps a cursor over the Event table (the engine never waits for email) and steps over a
missing event id only once it is settled (agents.cursor), so an event committed out of id
order is not passed by. Each Email row is made in the transaction that moves the cursor, and
its key makes it once per recipient however often a batch is read. send claims a row by a
conditional update, sends it with Django's email backend and marks it sent: a sender killed
between the two leaves the claim to run out, and the row is sent once more.
"""

import logging
import smtplib
import time
from collections.abc import Iterable
from datetime import datetime, timedelta
from typing import Any

from celery import current_app
from django.conf import settings
from django.contrib.auth import get_user_model
from django.contrib.auth.models import Permission
from django.core.mail import EmailMessage
from django.db import transaction
from django.db.models import F, Q, QuerySet
from django.utils import timezone

from agents.cursor import contiguous, gap_horizon
from agents.models import Event, Suspension
from notify import compose
from notify.models import Cursor, Email, EmailOptIn

log = logging.getLogger(__name__)

CURSOR = "email"
BATCH = 500
KINDS = {
    Event.Type.AGENT_SUSPENDED: Email.Kind.REQUEST,
    Event.Type.SUSPENSION_REMINDER: Email.Kind.REMINDER,
    Event.Type.SUSPENSION_ESCALATED: Email.Kind.ESCALATION,
}
# How long a sender holds an email: far longer than an SMTP exchange (EMAIL_TIMEOUT per step).
CLAIM = timedelta(seconds=60)
# A queued send task not taken this long is queued again (a lost broker message).
REQUEUE_AFTER = timedelta(seconds=30)
# After the n-th failed attempt the next waits RETRY_WAITS[n-1]; then the email has failed.
RETRY_WAITS = (
    timedelta(seconds=30),
    timedelta(minutes=2),
    timedelta(minutes=10),
    timedelta(hours=1),
)


# What a person needs for an email to be of use: to open the thread page the link leads to,
# and to decide there.
NEEDED = (("agents", "view_thread"), ("agents", "decide_suspension"))


def deciders() -> QuerySet:
    """Active people with an address who hold every NEEDED permission (through a group or
    their own; superusers hold all)."""
    users = get_user_model().objects.filter(is_active=True).exclude(email="")
    for label, codename in NEEDED:
        perm = Permission.objects.filter(content_type__app_label=label, codename=codename).first()
        holders = users.filter(
            Q(is_superuser=True) | Q(groups__permissions=perm) | Q(user_permissions=perm)
        )
        users = users.filter(pk__in=holders.values("pk"))
    return users


def opted_in(agent_name: str) -> QuerySet:
    """Deciders who asked for email about this agent's requests, or every agent's."""
    chosen = EmailOptIn.objects.filter(Q(agent__isnull=True) | Q(agent__name=agent_name))
    return deciders().filter(pk__in=chosen.values("user_id"))


def in_group(name: str) -> QuerySet:
    return deciders().filter(groups__name=name)


def fan_out(now: datetime | None = None, limit: int = BATCH) -> tuple[int, list[int]]:
    """Make the emails the events after the cursor call for; returns how many events it read
    past and the new emails' ids, queued for sending once the cursor's move commits."""
    now = now or timezone.now()
    # Most sweeps find nothing new: say so without a write transaction (on SQLite every
    # transaction here takes the database's write lock).
    at = Cursor.objects.filter(name=CURSOR).values_list("last_event_id", flat=True).first()
    if at is not None and not Event.objects.filter(id__gt=at).exists():
        return 0, []
    with transaction.atomic():
        cursor, _ = Cursor.objects.select_for_update().get_or_create(name=CURSOR)
        horizon = gap_horizon()  # before the rows are read (agents.cursor)
        rows = Event.objects.filter(id__gt=cursor.last_event_id).order_by("id")
        pairs = list(rows.values_list("id", "created_at")[:limit])
        taken, _ = contiguous(cursor.last_event_id, pairs, horizon, _pair, now)
        last = taken[-1][0] if taken else cursor.last_event_id
        if last == cursor.last_event_id:
            return 0, []
        kinds = list(KINDS)
        if not EmailOptIn.objects.exists():
            # A new request's email goes only to those who opted in: with nobody opted in,
            # its events need no reading (most gateways; each read costs several queries).
            kinds.remove(Event.Type.AGENT_SUSPENDED)
        wanted = Event.objects.filter(
            id__gt=cursor.last_event_id, id__lte=last, type__in=kinds
        ).select_related("suspension")
        made: list[int] = []
        for event in wanted.order_by("id"):
            if event.suspension is not None:
                made.extend(_emails_for(event, now))
        passed = last - cursor.last_event_id
        cursor.last_event_id = last
        cursor.save(update_fields=["last_event_id", "updated_at"])
        transaction.on_commit(lambda: enqueue(made))
    return passed, made


def _emails_for(event: Event, now: datetime) -> list[int]:
    s = event.suspension
    kind = KINDS[event.type]
    p = event.payload
    # Who gets it, and why: the escalation group is told that it is theirs.
    audiences: list[tuple[str, QuerySet]] = []
    if kind == Email.Kind.REQUEST:
        key = f"request:{s.group}"
        audiences.append((compose.OPTED_IN, opted_in(s.agent_name)))
    elif kind == Email.Kind.REMINDER:
        key = f"reminder:{s.group}:{p.get('reminder')}"
        if s.escalated_at is not None and s.escalate_to:
            audiences.append((compose.IN_GROUP, in_group(s.escalate_to)))
        audiences.append((compose.OPTED_IN, opted_in(s.agent_name)))
    else:
        key = f"escalation:{s.group}:{s.escalate_to}"
        audiences.append((compose.IN_GROUP, in_group(s.escalate_to)))
    if Email.objects.filter(key=key).exists():
        return []  # another call of the group (or an earlier read) made it
    recipients: dict[str, tuple[Any, str]] = {}
    for why, people in audiences:
        for user in people.order_by("pk"):
            recipients.setdefault(user.email.lower(), (user, why))
    if not recipients:
        return []
    group = list(Suspension.objects.filter(group=s.group).order_by("created_at", "id"))
    texts = {why: compose.message(kind, group, event, now, why) for why, _ in audiences}
    rows = Email.objects.bulk_create(
        [
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
                next_try_at=now,
                enqueued_at=now,
            )
            for address, (user, why) in recipients.items()
        ]
    )
    return [e.pk for e in rows]


def enqueue(ids: Iterable[int]) -> None:
    """Queue a send task per email. A broker that is away loses nothing: the row stays
    pending, and requeue_unsent queues it again."""
    for pk in ids:
        try:
            # By name: notify.tasks imports this module, and sending does not finalize the
            # Celery app in a web process (as webhooks.queue.enqueue sends).
            current_app.send_task("notify.tasks.send_email", args=(pk,))
        except Exception:
            log.warning("could not queue email %s; the sweep queues it again", pk, exc_info=True)
            return


def requeue_unsent(now: datetime | None = None, limit: int = 200) -> int:
    """Queue again the emails that are due but not sent: a lost task, a sender killed
    mid-send (its claim ran out), or a failed attempt whose wait is over."""
    now = now or timezone.now()
    due = list(
        Email.objects.filter(status=Email.Status.PENDING, next_try_at__lte=now)
        .filter(Q(enqueued_at__isnull=True) | Q(enqueued_at__lt=now - REQUEUE_AFTER))
        .filter(Q(claimed_until__isnull=True) | Q(claimed_until__lt=now))
        .order_by("next_try_at")
        .values_list("pk", flat=True)[:limit]
    )
    if due:
        Email.objects.filter(pk__in=due).update(enqueued_at=now)
        enqueue(due)
    return len(due)


def send(pk: int, now: datetime | None = None) -> bool:
    """Send one email if it is still due and nobody else is sending it; True if sent."""
    now = now or timezone.now()
    claimed = (
        Email.objects.filter(pk=pk, status=Email.Status.PENDING, next_try_at__lte=now)
        .filter(Q(claimed_until__isnull=True) | Q(claimed_until__lt=now))
        .update(claimed_until=now + CLAIM, attempts=F("attempts") + 1)
    )
    if not claimed:
        return False
    email = Email.objects.get(pk=pk)
    # Nothing left for a person to decide: every request of the group was decided, or was
    # ignored (closed for people, agents.decisions.ignore) after the email was made.
    open_requests = Suspension.objects.filter(
        group=email.group, status=Suspension.Status.PENDING, ignored_at__isnull=True
    )
    if not open_requests.exists():
        Email.objects.filter(pk=pk).update(status=Email.Status.SKIPPED, claimed_until=None)
        return False
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
        failed = email.attempts > len(RETRY_WAITS)
        wait = RETRY_WAITS[min(email.attempts, len(RETRY_WAITS)) - 1]
        Email.objects.filter(pk=pk).update(
            status=Email.Status.FAILED if failed else Email.Status.PENDING,
            next_try_at=now + wait,
            claimed_until=None,
            last_error=f"{type(e).__name__}: {e}"[:2000],
        )
        log.warning("email %s to %s: attempt %s failed: %s", pk, email.to, email.attempts, e)
        return False
    Email.objects.filter(pk=pk).update(
        status=Email.Status.SENT, sent_at=timezone.now(), claimed_until=None, last_error=""
    )
    return True


def dispatch(budget: float = 2.0) -> dict[str, Any]:
    """One sweep: new events to emails until caught up (or `budget` seconds), then the
    emails to try again."""
    started = time.monotonic()
    made = 0
    while True:
        passed, batch = fan_out()
        made += len(batch)
        if passed < BATCH or time.monotonic() - started > budget:
            break
    return {"made": made, "requeued": requeue_unsent()}


def _pair(row: tuple[int, datetime]) -> tuple[int, datetime]:
    return row
