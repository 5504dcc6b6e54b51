"""/metrics for Prometheus, the conversation figures as JSON, and the metrics page for staff."""

import hmac
from datetime import datetime, timedelta
from typing import Any

from django.conf import settings
from django.http import HttpRequest, HttpResponse, JsonResponse
from django.shortcuts import render
from django.utils import timezone
from django.views.decorators.csrf import csrf_exempt
from django.views.decorators.http import require_safe
from prometheus_client import CollectorRegistry
from prometheus_client.exposition import choose_encoder
from pydantic import Field

from access.auth import api
from access.models import Scope
from approvals.audit import staff_only
from approvals.http import error
from approvals.openapi import Answer, Query, operation
from metrics import charts, reviewers, tiers
from metrics.collector import GatewayCollector
from metrics.conversations import parse_window, series, summary
from metrics.operations import OperationsCollector

# The page's windows: how long, and in how many buckets.
WINDOWS = {
    "1h": (timedelta(hours=1), 12),
    "6h": (timedelta(hours=6), 24),
    "24h": (timedelta(hours=24), 24),
    "7d": (timedelta(days=7), 28),
    "30d": (timedelta(days=30), 30),
}
DEFAULT_WINDOW = "24h"
# Pending by agent draws this many agents (the most pending at any point), the rest as one.
AGENT_LINES = 5


def metrics_token(request: HttpRequest) -> bool:
    """Does the request carry `Authorization: Bearer <METRICS_TOKEN>`?"""
    token = settings.METRICS_TOKEN
    scheme, _, raw = request.headers.get("Authorization", "").partition(" ")
    if not token or scheme.lower() != "bearer":
        return False
    return hmac.compare_digest(raw.strip().encode(), token.encode())


@csrf_exempt
@require_safe
def prometheus(request: HttpRequest) -> HttpResponse:
    """The Prometheus exposition of metrics.collector, for a scraper holding METRICS_TOKEN.
    Without the setting the endpoint does not exist (404); without the token, 401."""
    if not settings.METRICS_TOKEN:
        return HttpResponse("Not found.\n", status=404, content_type="text/plain")
    if not metrics_token(request):
        response = HttpResponse(
            "Send Authorization: Bearer <METRICS_TOKEN>.\n", status=401, content_type="text/plain"
        )
        response["WWW-Authenticate"] = 'Bearer realm="metrics"'
        return response
    registry = CollectorRegistry(auto_describe=False)
    registry.register(GatewayCollector())
    registry.register(OperationsCollector())
    encode, content_type = choose_encoder(request.headers.get("Accept", ""))
    return HttpResponse(encode(registry), content_type=content_type)


def _conversations(request: HttpRequest) -> HttpResponse:
    try:
        window = parse_window(request.GET.get("window", DEFAULT_WINDOW))
    except ValueError as e:
        return error(400, "invalid", str(e), fields={"window": str(e)})
    until = timezone.now()
    return JsonResponse(
        {"window": request.GET.get("window", DEFAULT_WINDOW), **summary(until - window, until)}
    )


@api(["GET"], scope=Scope.ADMIN)
def _conversations_for_staff(request: HttpRequest) -> HttpResponse:
    if not request.user.is_staff:
        return error(403, "forbidden", "Only staff may read the metrics.")
    return _conversations(request)


class WindowQuery(Query):
    window: str | None = Field(
        None, pattern=r"^[1-9][0-9]{0,6}[smhd]$", description="90s, 15m, 24h (the default), 7d..."
    )


class Conversations(Answer):
    """metrics.conversations.summary's figures over the window."""

    window: str


@operation(
    "GET",
    "Conversation figures",
    query=WindowQuery,
    responses={200: Conversations},
    description="The four figures of the requests raised in the last `window` (at most 31 "
    "days), for staff with the admin scope, or a client sending METRICS_TOKEN.",
)
@csrf_exempt
def conversations(request: HttpRequest) -> HttpResponse:
    """GET /api/metrics/conversations?window=24h: the four figures (docs/metrics.md) over the last
    `window` (metrics.conversations.summary defines them), for staff (session or API token)
    or a client holding METRICS_TOKEN."""
    if request.method in ("GET", "HEAD") and metrics_token(request):
        return _conversations(request)
    return _conversations_for_staff(request)


def _aligned(now: datetime, step: timedelta) -> datetime:
    """The end of the bucket `now` falls in, buckets counted from the epoch, so the chart
    moves by whole buckets and a bucket always covers the same span."""
    epoch = datetime(1970, 1, 1, tzinfo=now.tzinfo)
    buckets = -((epoch - now) // step)  # ceiling division
    return epoch + buckets * step


def _agent_lines(pending: dict[str, list[int]]) -> dict[str, list[float | None]]:
    ranked = sorted(pending, key=lambda agent: (-max(pending[agent]), agent))
    shown = {agent: list(pending[agent]) for agent in ranked[:AGENT_LINES]}
    rest = ranked[AGENT_LINES:]
    if rest:
        columns = zip(*(pending[a] for a in rest), strict=True)
        shown[f"{len(rest)} others"] = [sum(column) for column in columns]
    return shown


def _seconds(value: float | None) -> str:
    return "–" if value is None else charts.seconds(value)


def _percent(value: float | None) -> str:
    return "–" if value is None else f"{charts.number(value)} %"


def _tiles(figures: dict[str, Any]) -> list[dict[str, str]]:
    """The four figures of the JSON summary, as the page shows them."""
    total = figures["input_requests_total"]
    return [
        {
            "id": "requests",
            "label": "Input requests",
            "value": str(total),
            "note": f"{figures['pending']} still pending",
        },
        {
            "id": "response",
            "label": "Average response",
            "value": _seconds(figures["average_response_time"]),
            "note": f"over {figures['answered']} answered",
        },
        {
            "id": "completion",
            "label": "Completion rate",
            "value": _percent(figures["completion_rate"]),
            "note": "answered by a person",
        },
        {
            "id": "timeouts",
            "label": "Timeout rate",
            "value": _percent(figures["timeout_rate"]),
            "note": f"{figures['timed_out']} timed out, {figures['cancelled']} cancelled",
        },
    ]


def _tier_tables(since: datetime, until: datetime) -> dict[str, Any]:
    """The page's tables of the tiers of review over [since, until): who decided, per agent
    (all agents first); a shadow model's agreement with people; each reviewer's look."""
    total, agents = tiers.by_tier(since, until)
    rows = [
        {
            "agent": row.agent,
            "cells": [row.decided[tier] for tier in tiers.ORDER],
            "total": row.total,
            "reached": row.reached_person,
            "share": _percent(row.person_share),
        }
        for row in (total, *agents)
    ]
    return {
        "tier_names": [TIER_NAMES[tier] for tier in tiers.ORDER],
        "tier_rows": rows,
        "agreements": [
            {"row": row, "agreement": _percent(row.agreement)}
            for row in tiers.shadow_agreement(since, until)
        ],
        "reviewers": [
            {
                "row": row,
                "approve_rate": _percent(row.approve_rate),
                "median_look": _seconds(row.median_look),
            }
            for row in reviewers.by_reviewer(since, until)
        ],
    }


# The tiers as the page's columns name them.
TIER_NAMES = {
    "rule": "Rule",
    "grant": "Grant",
    "history": "History rule",
    "model": "Model",
    "person": "Person",
    "deadline": "Deadline",
}


@staff_only
def insights(request: HttpRequest) -> HttpResponse:
    """The metrics page: the four figures over the window, and its charts."""
    key = request.GET.get("window", DEFAULT_WINDOW)
    if key not in WINDOWS:
        key = DEFAULT_WINDOW
    window, count = WINDOWS[key]
    now = timezone.now()
    step = window / count
    until = _aligned(now, step)
    data = series(until - window, until, count, now)
    starts = data.starts
    bucket = charts.span(step)
    figures: list[dict[str, Any]] = [
        {
            "start": at,
            "raised": data.raised[i],
            "p50": _seconds(data.p50[i]),
            "p95": _seconds(data.p95[i]),
            "closed": data.closed[i],
            "timeout_rate": _percent(data.timeout_rate[i]),
            "pending": sum(levels[i] for levels in data.pending.values()),
        }
        for i, at in enumerate(starts)
    ]
    context = {
        "nav": "insights",
        "windows": list(WINDOWS),
        "window": key,
        "tiles": _tiles(summary(now - window, now)),
        **_tier_tables(now - window, now),
        "bucket": bucket,
        "figures": figures,
        "charts": [
            charts.bar_chart(
                "requests", "Requests raised", f"per {bucket}", starts, step, data.raised
            ),
            charts.line_chart(
                "response",
                "Response time",
                "answers given in each bucket",
                starts,
                step,
                {"p50": data.p50, "p95": data.p95},
                label=charts.seconds,
                scale=charts.time_top,
            ),
            charts.line_chart(
                "timeouts",
                "Timeout rate",
                "% of the requests closed in each bucket",
                starts,
                step,
                {"timed out": data.timeout_rate},
                label=lambda v: f"{charts.number(v)} %",
                least=1,
            ),
            charts.line_chart(
                "pending",
                "Pending by agent",
                "at the end of each bucket",
                starts,
                step,
                _agent_lines(data.pending),
                least=5,
            ),
        ],
    }
    return render(request, "metrics/insights.html", context)
