"""The writes of presence: look at cards, claim, release, leave, and a process's beat; and
the claims that hold now (the inbox filters by them).

Each is one short statement or transaction, called from a socket (presence.session) in a
thread. None writes an Event: a claim or a look is not a decision and not an audit fact.
"""

import uuid
from dataclasses import dataclass
from datetime import timedelta
from typing import Any

from django.conf import settings
from django.contrib.auth import get_user_model
from django.db import IntegrityError, transaction
from django.db.models import Q, QuerySet
from django.utils import timezone

from agents import policy
from agents.models import Suspension
from presence.models import CardView, Claim, Viewer

VIEW_LIMIT = 50  # suspensions one socket may look at at once; more are ignored
NAME_LIMIT = Viewer._meta.get_field("name").max_length
BEAT = 10.0  # seconds between a process's refreshes of its rows' seen_at
STALE = timedelta(seconds=3 * BEAT)  # rows not refreshed this long belong to a dead process


@dataclass(frozen=True)
class Reviewer:
    """Who is behind one socket: the socket, its server process, the user and their name."""

    socket: uuid.UUID
    process: uuid.UUID
    user_id: int
    name: str


@dataclass(frozen=True)
class Refusal:
    """Why a claim was refused: `error` is a stable code, `detail` a sentence for people."""

    error: str
    detail: str


def display_name(user: Any) -> str:
    """The name others see: the full name when there is one, else the username."""
    return (user.get_full_name().strip() or user.get_username())[:NAME_LIMIT]


def why_not(user_id: int, suspension: Suspension) -> str | None:
    """Why this user may not claim `suspension`, or None: who may not decide it (its policy,
    agents.policy) may not claim it. The user is read afresh, so a permission taken away while
    the socket is open holds from the next claim on (a user object caches its permissions)."""
    user = get_user_model().objects.filter(pk=user_id, is_active=True).first()
    refused = policy.why_not(suspension, policy.Viewer.of(user))
    return refused[1] if refused else None


def look(reviewer: Reviewer, ids: list[uuid.UUID]) -> set[str]:
    """The socket looks at these suspensions now, and at no others: its viewer rows become
    those of the ones still pending (at most VIEW_LIMIT), and the reviewer's first look at each
    is kept (CardView). Returns their ids."""
    pending = {
        str(pk)
        for pk in Suspension.objects.filter(
            pk__in=ids[:VIEW_LIMIT], status=Suspension.Status.PENDING
        ).values_list("pk", flat=True)
    }
    now = timezone.now()
    with transaction.atomic():
        Viewer.objects.filter(socket=reviewer.socket).exclude(suspension_id__in=pending).delete()
        kept = {
            str(pk)
            for pk in Viewer.objects.filter(socket=reviewer.socket).values_list(
                "suspension_id", flat=True
            )
        }
        Viewer.objects.bulk_create(
            [_viewer(reviewer, pk, now) for pk in pending - kept], ignore_conflicts=True
        )
        # The first time this reviewer had each card on screen, whichever socket: how long
        # they looked before deciding is counted from it (metrics.reviewers).
        CardView.objects.bulk_create(
            [
                CardView(suspension_id=pk, user_id=reviewer.user_id, first_shown_at=now)
                for pk in pending - kept
            ],
            ignore_conflicts=True,
        )
    return pending


def _viewer(reviewer: Reviewer, suspension_id: str, now: Any) -> Viewer:
    return Viewer(
        socket=reviewer.socket,
        process=reviewer.process,
        suspension_id=suspension_id,
        user_id=reviewer.user_id,
        name=reviewer.name,
        seen_at=now,
    )


def claim(reviewer: Reviewer, suspension_id: uuid.UUID) -> Refusal | None:
    """Claim a pending suspension for CLAIM_SECONDS; None when the claim is this reviewer's.
    Claiming again renews one's own claim (and moves it to this socket). A claim held by
    someone else is taken only once it has lapsed or its process has died."""
    suspension = Suspension.objects.filter(pk=suspension_id).first()
    if suspension is None:
        return Refusal("not_found", "No such request.")
    if suspension.status != Suspension.Status.PENDING:
        return Refusal("not_pending", "This request is no longer pending.")
    refused = why_not(reviewer.user_id, suspension)
    if refused is not None:
        return Refusal("forbidden", f"You may not claim this request: {refused}")
    now = timezone.now()
    fields = {
        "user_id": reviewer.user_id,
        "name": reviewer.name,
        "socket": reviewer.socket,
        "process": reviewer.process,
        "claimed_at": now,
        "expires_at": now + timedelta(seconds=settings.CLAIM_SECONDS),
        "seen_at": now,
    }
    # A conditional update: one's own claim, or one that no longer holds, is taken over.
    taken = (
        Claim.objects.filter(suspension_id=suspension_id)
        .filter(Q(user_id=reviewer.user_id) | Q(expires_at__lte=now) | Q(seen_at__lt=now - STALE))
        .update(**fields)
    )
    if not taken:
        try:
            with transaction.atomic():
                Claim.objects.create(suspension_id=suspension_id, **fields)
        except IntegrityError:
            holder = Claim.objects.filter(suspension_id=suspension_id).values("name").first()
            who = holder["name"] if holder else "Someone else"
            return Refusal("claimed", f"{who} is already reviewing this request.")
    # Who claims a card looks at it: the claimer's socket gets the card's PRESENCE too.
    Viewer.objects.bulk_create([_viewer(reviewer, str(suspension_id), now)], ignore_conflicts=True)
    return None


def release(reviewer: Reviewer, suspension_id: uuid.UUID) -> bool:
    """Give up one's claim (from any of one's sockets). False when one held none."""
    deleted, _ = Claim.objects.filter(
        suspension_id=suspension_id, user_id=reviewer.user_id
    ).delete()
    return bool(deleted)


def leave(socket: uuid.UUID) -> bool:
    """The socket closed: it looks at nothing and its claims are released. True when it had
    rows, so the others must be told."""
    with transaction.atomic():
        viewers, _ = Viewer.objects.filter(socket=socket).delete()
        claims, _ = Claim.objects.filter(socket=socket).delete()
    return bool(viewers or claims)


def beat(process: uuid.UUID, sockets: list[uuid.UUID]) -> bool:
    """Keep the rows of this process's open `sockets` alive; delete its rows of any other
    socket (one whose leave() failed), lapsed claims, and the rows of dead processes. True
    when something was deleted (the pages must be told)."""
    now = timezone.now()
    mine = Q(process=process)
    Viewer.objects.filter(mine, socket__in=sockets).update(seen_at=now)
    Claim.objects.filter(mine, socket__in=sockets).update(seen_at=now)
    gone = (mine & ~Q(socket__in=sockets)) | Q(seen_at__lt=now - STALE)
    viewers, _ = Viewer.objects.filter(gone).delete()
    claims, _ = Claim.objects.filter(gone | Q(expires_at__lte=now)).delete()
    return bool(viewers or claims)


def holding() -> QuerySet[Claim]:
    """The claims that hold now: not lapsed, and kept alive by a live process's beat."""
    now = timezone.now()
    return Claim.objects.filter(expires_at__gt=now, seen_at__gte=now - STALE)
