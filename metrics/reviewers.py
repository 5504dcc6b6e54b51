"""Each reviewer's decisions over a window: how many, the share approved, and how long they
looked before deciding, so rubber-stamping is visible, not guessed.

A decision is an approval or a rejection of a confirmation by a person: the suspension they
decided (tier `person`) or, under a quorum, their vote. How long they looked is the time from
the first moment their page had the card on screen (presence.models.CardView: the page
reports the cards it shows, the server notes the time it hears of one) to the decision. A
decision made without the card on a page (through the API, Slack or A2A) has no look time and
is counted only in the decisions and the approve rate.
"""

import statistics
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any
from uuid import UUID

from django.db.models import OuterRef, Subquery

from agents.models import Suspension, Vote
from agents.tiers import Tier
from metrics.tiers import percent
from presence.models import CardView

S = Suspension.Status
# An approval this soon after the card was shown is counted as quick (issue 41).
QUICK = timedelta(seconds=2)


@dataclass
class Reviewer:
    name: str
    decisions: int = 0
    approved: int = 0
    looks: list[float] = field(default_factory=list)  # seconds, one per decision with a look
    quick_approvals: int = 0  # approvals within QUICK of the card being shown

    @property
    def approve_rate(self) -> float | None:
        return percent(self.approved, self.decisions)

    @property
    def median_look(self) -> float | None:
        """The median seconds looked before deciding; None when no decision had a look."""
        return round(statistics.median(self.looks), 3) if self.looks else None

    def as_json(self) -> dict[str, Any]:
        return {
            "reviewer": self.name,
            "decisions": self.decisions,
            "approved": self.approved,
            "approve_rate": self.approve_rate,
            "with_look": len(self.looks),
            "median_look_seconds": self.median_look,
            "approved_within_2s": self.quick_approvals,
        }


# (suspension, user) → (the user's name, approved, when, when they first had the card on screen)
Made = dict[tuple[UUID, int], tuple[str, bool, datetime, datetime | None]]


def _shown(suspension: str, user: str) -> Subquery:
    """When the user's page first had the suspension's card on screen (CardView's unique
    (suspension, user) index finds it), or NULL."""
    views = CardView.objects.filter(suspension_id=OuterRef(suspension), user_id=OuterRef(user))
    return Subquery(views.values("first_shown_at")[:1])


def _decisions(since: datetime, until: datetime) -> Made:
    """Every decision in [since, until): the suspensions people decided, then the votes of a
    quorum (the vote that completed one is the suspension's decision already)."""
    found: Made = {}
    decided = (
        Suspension.objects.filter(
            decided_at__gte=since,
            decided_at__lt=until,
            tier=Tier.PERSON,
            kind=Suspension.Kind.CONFIRMATION,
            status__in=[S.APPROVED, S.REJECTED],
            decided_by__isnull=False,
        )
        .annotate(shown=_shown("pk", "decided_by_id"))
        .values_list("pk", "decided_by_id", "decided_by_name", "status", "decided_at", "shown")
    )
    for pk, user, name, status, at, shown in decided.iterator(2000):
        found[pk, user] = (name, status == S.APPROVED, at, shown)
    votes = (
        Vote.objects.filter(created_at__gte=since, created_at__lt=until, user__isnull=False)
        .annotate(shown=_shown("suspension_id", "user_id"))
        .values_list("suspension_id", "user_id", "user_name", "approved", "created_at", "shown")
    )
    for pk, user, name, approved, at, shown in votes.iterator(2000):
        found.setdefault((pk, user), (name, approved, at, shown))
    return found


def by_reviewer(since: datetime, until: datetime) -> list[Reviewer]:
    """The reviewers who decided in [since, until), most decisions first."""
    reviewers: dict[int, Reviewer] = {}
    for (_, user), (name, approved, at, first) in _decisions(since, until).items():
        reviewer = reviewers.setdefault(user, Reviewer(name))
        reviewer.decisions += 1
        reviewer.approved += approved
        if first is None or first > at:
            continue  # no card on a page before the decision: no look time
        looked = at - first
        reviewer.looks.append(looked.total_seconds())
        if approved and looked <= QUICK:
            reviewer.quick_approvals += 1
    return sorted(reviewers.values(), key=lambda r: (-r.decisions, r.name))
