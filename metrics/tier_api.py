"""GET /api/metrics/tiers: the tiers of review measured (metrics.tiers, metrics.reviewers)
as JSON, for staff or a client holding METRICS_TOKEN, as /api/metrics/conversations is."""

from datetime import datetime
from typing import Any

from django.http import HttpRequest, HttpResponse, JsonResponse
from django.utils import timezone
from django.views.decorators.csrf import csrf_exempt
from pydantic import BaseModel, Field

from access.auth import api
from access.models import Scope
from approvals.http import error
from approvals.openapi import Answer, operation
from metrics import reviewers, tiers
from metrics.conversations import parse_window
from metrics.views import DEFAULT_WINDOW, WindowQuery, metrics_token


def _tiers(request: HttpRequest) -> HttpResponse:
    key = request.GET.get("window", DEFAULT_WINDOW)
    try:
        window = parse_window(key)
    except ValueError as e:
        return error(400, "invalid", str(e), fields={"window": str(e)})
    until = timezone.now()
    return JsonResponse({"window": key, **tier_figures(until - window, until)})


def tier_figures(since: datetime, until: datetime) -> dict[str, Any]:
    """The tiers' figures over [since, until) as the API answers them (docs/tiers.md)."""
    total, agents = tiers.by_tier(since, until)
    return {
        "since": since.isoformat(),
        "until": until.isoformat(),
        "tiers": list(tiers.ORDER),
        "all": total.as_json(),
        "agents": [row.as_json() for row in agents],
        "shadow": [row.as_json() for row in tiers.shadow_agreement(since, until)],
        "reviewers": [row.as_json() for row in reviewers.by_reviewer(since, until)],
    }


@api(["GET"], scope=Scope.ADMIN)
def _tiers_for_staff(request: HttpRequest) -> HttpResponse:
    if not request.user.is_staff:
        return error(403, "forbidden", "Only staff may read the metrics.")
    return _tiers(request)


class TierCounts(BaseModel):
    """Requests decided in the window, by tier, and how many reached a person (tiers person
    and deadline: they waited in the reviewers' inbox)."""

    decided: dict[str, int]
    total: int
    reached_person: int
    person_share: float | None = Field(description="% of total; null when none")


class AgentTierCounts(TierCounts):
    agent: str


class ShadowAgreement(BaseModel):
    """A reviewing model's recommendations in shadow mode against people's decisions."""

    agent: str
    tool: str
    counts: dict[str, dict[str, int]] = Field(
        description="recommendation (approve, reject, escalate) → decision (approved, "
        "rejected) → requests"
    )
    compared: int
    agreed: int
    agreement: float | None = Field(description="% of compared; null when none")
    approvals_people_rejected: int


class ReviewerFigures(BaseModel):
    reviewer: str
    decisions: int
    approved: int
    approve_rate: float | None
    with_look: int = Field(description="decisions made with the card shown on a page first")
    median_look_seconds: float | None
    approved_within_2s: int


class Tiers(Answer):
    """metrics.tiers and metrics.reviewers over the window."""

    window: str
    since: str
    until: str
    tiers: list[str]
    all: TierCounts
    agents: list[AgentTierCounts]
    shadow: list[ShadowAgreement]
    reviewers: list[ReviewerFigures]


@operation(
    "GET",
    "Tiers of review",
    query=WindowQuery,
    responses={200: Tiers},
    description="Over the requests decided in the last `window` (at most 31 days): how many "
    "each tier of review decided (rule, grant, history, model, person, deadline) and the "
    "share that reached a person, all and per agent; a reviewing model's agreement with "
    "people in shadow mode, per agent and tool; each reviewer's decisions, approve rate and "
    "look times. For staff with the admin scope, or a client sending METRICS_TOKEN.",
)
@csrf_exempt
def tier_metrics(request: HttpRequest) -> HttpResponse:
    """GET /api/metrics/tiers?window=24h: the tiers' figures (docs/tiers.md), for staff
    (session or API token) or a client holding METRICS_TOKEN."""
    if request.method in ("GET", "HEAD") and metrics_token(request):
        return _tiers(request)
    return _tiers_for_staff(request)
