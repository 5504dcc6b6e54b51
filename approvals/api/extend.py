"""POST /api/threads/{tid}/suspensions/{sid}/extend: a reviewer moves a deadline, once."""

from typing import Any

from django.http import HttpRequest, JsonResponse

from access.auth import api
from access.models import Scope
from agents import reminders
from agents.models import Suspension
from agents.payloads import extension_payload, suspension_payload
from approvals.api.bodies import Extend
from approvals.contract import parse
from approvals.http import BadRequest, error, json_body, parse_uuid
from approvals.openapi import operation
from approvals.schemas import Extended


def _answer(s: Suspension, status: int, **extra: Any) -> JsonResponse:
    body = {**extra, "suspension": suspension_payload(s), "extension": extension_payload(s)}
    return JsonResponse(body, status=status)


@operation(
    "POST",
    "Extend a deadline",
    body=Extend,
    responses={200: Extended},
    errors=(409,),
    description="Move a pending deadline later, once, with a reason (who may decide may "
    "extend); 409 `already_extended` or `not_pending`.",
)
@api(["POST"], perm="agents.decide_suspension", scope=Scope.DECIDE)
def extend(request: HttpRequest, thread_id: str, suspension_id: str) -> JsonResponse:
    """Who may decide may extend; the extender is the caller, never a field of the body."""
    thread_pk, pk = parse_uuid(thread_id), parse_uuid(suspension_id)
    s = Suspension.objects.filter(pk=pk, thread_id=thread_pk).first() if thread_pk and pk else None
    if s is None:
        return error(404, "not_found", "No such suspension in this thread.")
    try:
        body = parse(Extend, json_body(request))
    except BadRequest as e:
        return error(e.status, e.code, e.detail, e.fields)
    try:
        done = reminders.extend(s, request.user, body.seconds, body.reason)
    except reminders.NotPending as e:
        return _answer(
            e.suspension,
            409,
            error="not_pending",
            detail=f"It is {e.suspension.status.replace('_', ' ')}: there is no deadline to move.",
        )
    except reminders.AlreadyExtended as e:
        who = e.suspension.extended_by_name or "someone"
        return _answer(
            e.suspension,
            409,
            error="already_extended",
            detail=f"{who} already extended this deadline; it can be extended once.",
        )
    return _answer(
        done.suspension, 200, old_expires_at=done.old_expires_at and done.old_expires_at.isoformat()
    )
