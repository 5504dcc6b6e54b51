"""Suspensions: list what waits for a decision or an answer, read one."""

import uuid
from typing import Any

from django.http import HttpRequest, JsonResponse

from access import scopes
from access.auth import api
from access.models import Scope
from agents import policy, statements, versions
from agents.models import Suspension
from agents.payloads import suspension_payload
from approvals import schemas as shapes
from approvals.api.paging import keyset_page
from approvals.api.threads import SEE_OTHERS
from approvals.http import BadRequest, bad_request, not_found, parse_uuid
from approvals.openapi import operation

# A decider sees what waits for a decision; a runs-only token, its own runs' suspensions.
SEE_SUSPENSIONS = (Scope.READ, Scope.DECIDE, Scope.RUNS)


def sees_every_suspension(user: Any) -> bool:
    return scopes.has(user, Scope.READ) or scopes.has(user, Scope.DECIDE)


@operation(
    "GET", "List suspensions", query=shapes.SuspensionQuery, responses={200: shapes.SuspensionPage}
)
@api(["GET"], perm="agents.view_suspension", scope=SEE_SUSPENSIONS)
def suspensions(request: HttpRequest) -> JsonResponse:
    """Oldest first, a page at a time; `next` carries a keyset cursor."""
    q = request.GET
    rows = Suspension.objects.all()
    if not sees_every_suspension(request.user):
        rows = rows.filter(thread__created_by=request.user)
    try:
        status = q.get("status")
        if status:
            if status not in Suspension.Status.values:
                raise BadRequest(
                    "Unknown status.", {"status": f"One of {', '.join(Suspension.Status.values)}."}
                )
            rows = rows.filter(status=status)
        for key, column in (("agent", "agent_name"), ("tool", "tool_name"), ("kind", "kind")):
            if q.get(key):
                rows = rows.filter(**{column: q[key]})
        if q.get("thread"):
            pk = parse_uuid(q["thread"])
            if pk is None:
                raise BadRequest("Bad thread id.", {"thread": "A thread id (UUID)."})
            rows = rows.filter(thread_id=pk)
        ignored = q.get("ignored")
        if ignored not in (None, "", "0", "false", "1", "true"):
            raise BadRequest("Bad ignored.", {"ignored": "true or 1 (or false or 0)."})
        if ignored:
            rows = rows.filter(ignored_at__isnull=ignored in ("0", "false"))
        page, next_url = keyset_page(request, rows, newest_first=False)
    except BadRequest as e:
        return bad_request(e)
    viewer = policy.Viewer.of(request.user)
    return JsonResponse({"results": [_for_viewer(s, viewer) for s in page], "next": next_url})


def suspension_or_none(suspension_id: str, thread_id: uuid.UUID | None = None) -> Suspension | None:
    pk = parse_uuid(suspension_id)
    if pk is None:
        return None
    return statements.suspension(pk, thread_id)


@operation("GET", "One suspension", responses={200: shapes.SuspensionWithViewer})
@api(["GET"], perm="agents.view_suspension", scope=SEE_SUSPENSIONS)
def suspension_detail(request: HttpRequest, suspension_id: str) -> JsonResponse:
    s = suspension_or_none(suspension_id)
    if s is None:
        return not_found("suspension")
    if not sees_every_suspension(request.user) and not scopes.owns(request.user, s.thread):
        return scopes.insufficient(Scope.READ, SEE_OTHERS)
    return JsonResponse(_for_viewer(s, policy.Viewer.of(request.user)))


def _for_viewer(s: Suspension, viewer: policy.Viewer) -> dict[str, Any]:
    """The suspension, and whether the caller may decide it and if not why (agents.policy)."""
    return {**with_version(s), "you": policy.viewer_payload(s, viewer)}


def with_version(s: Suspension) -> dict[str, Any]:
    """The suspension with how its agent and tool now compare with when it was made."""
    return {**suspension_payload(s), "version": versions.version_payload(s)}
