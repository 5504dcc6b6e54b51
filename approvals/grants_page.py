"""The Grants page: the standing grants that may still approve requests, and the latest
others, each revocable at once (agents.grants; the API's side is approvals.api.grants)."""

from django.contrib.auth.decorators import login_required
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.utils import timezone
from django.views.decorators.http import require_POST

from access.permissions import require
from agents import grants
from agents.models import Grant
from approvals.api.grants import listed
from approvals.http import parse_uuid

DECIDE = "agents.decide_suspension"
# The ended grants the page shows under the active ones.
ENDED_SHOWN = 20


@login_required
def grants_page(request: HttpRequest) -> HttpResponse:
    """Who may decide requests sees every grant (each approves without them)."""
    require(request, DECIDE)
    now = timezone.now()
    active = [grants.payload(g, now) for g in listed()]
    ended = [grants.payload(g, now) for g in listed(everything=True)]
    ended = [g for g in ended if g["state"] != "active"][:ENDED_SHOWN]
    return render(
        request, "approvals/grants.html", {"active": active, "ended": ended, "nav": "grants"}
    )


@login_required
@require_POST
def revoke(request: HttpRequest, grant_id: str) -> HttpResponse:
    require(request, DECIDE)
    pk = parse_uuid(grant_id)
    if pk is None or not Grant.objects.filter(pk=pk).exists():
        raise Http404
    grants.revoke(pk, request.user)
    return redirect("grants")
