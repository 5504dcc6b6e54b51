"""Standing grants over the API: GET /api/grants, POST /api/grants/{id}/revoke. They are made
with an approval (resumeExecution's `grant`, approvals.api.decisions); agents.grants."""

from django.db.models import F
from django.http import HttpRequest, JsonResponse
from django.utils import timezone

from access.auth import api
from access.models import Scope
from agents import grants
from agents.models import Grant
from approvals import schemas as shapes
from approvals.http import error, parse_uuid
from approvals.openapi import operation

# The list's length: the active ones first, then the latest others.
LISTED = 200


def listed(everything: bool = False) -> list[Grant]:
    """The grants a page or the API lists: those that may still approve, soonest to end
    first; with `everything`, the latest made, whatever their state."""
    now = timezone.now()
    if everything:
        return list(Grant.objects.order_by("-created_at")[:LISTED])
    active = Grant.objects.filter(
        revoked_at__isnull=True, expires_at__gt=now, uses__lt=F("max_uses")
    )
    return list(active.order_by("expires_at")[:LISTED])


@operation(
    "GET",
    "Standing grants",
    query=shapes.GrantQuery,
    responses={200: shapes.GrantList},
    description="The grants that may still approve requests (`state=all`: the latest 200 "
    "whatever their state). Anyone who may decide requests may list them.",
)
@api(["GET"], perm="agents.decide_suspension", scope=(Scope.DECIDE, Scope.READ))
def grant_list(request: HttpRequest) -> JsonResponse:
    state = request.GET.get("state", "active")
    if state not in ("active", "all"):
        return error(400, "invalid", "Bad state.", {"state": "active or all."})
    now = timezone.now()
    found = listed(everything=state == "all")
    return JsonResponse({"grants": [grants.payload(g, now) for g in found]})


@operation(
    "POST",
    "Revoke a standing grant",
    responses={200: shapes.GrantRevoked},
    path={"grant_id": "The grant's id."},
    description="Stop a grant at once: no request is approved by it after this answer. "
    "Anyone who may decide requests may revoke any grant (saying no is always safe); "
    "revoking one already revoked answers 200 with `revoked: false`.",
)
@api(["POST"], perm="agents.decide_suspension", scope=Scope.DECIDE)
def grant_revoke(request: HttpRequest, grant_id: str) -> JsonResponse:
    pk = parse_uuid(grant_id)
    if pk is None or not Grant.objects.filter(pk=pk).exists():
        return error(404, "not_found", "No such grant.")
    g, revoked = grants.revoke(pk, request.user)
    return JsonResponse({"grant": grants.payload(g), "revoked": revoked})
