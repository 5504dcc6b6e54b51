"""A reply to a run that waits for input: POST /api/threads/{id}/messages."""

from django.http import HttpRequest, JsonResponse

from access import scopes
from access.auth import api
from access.models import Scope
from agents import replies
from approvals import schemas as shapes
from approvals.api.bodies import Message
from approvals.api.payloads import thread_payload
from approvals.api.threads import STEER_OTHERS, thread_or_404
from approvals.contract import parse
from approvals.http import BadRequest, bad_request, error, json_body, not_found
from approvals.openapi import operation


@operation(
    "POST",
    "Reply to a run",
    body=Message,
    responses={202: shapes.Thread},
    errors=(409,),
    description="Talk to the top of the stack; 409 unless the run waits for input.",
)
@api(["POST"], perm="agents.add_thread", scope=(Scope.RUNS, Scope.DECIDE))
def thread_messages(request: HttpRequest, thread_id: str) -> JsonResponse:
    thread = thread_or_404(thread_id)
    if thread is None:
        return not_found("thread")
    if not scopes.may_steer(request.user, thread):
        return scopes.insufficient(Scope.DECIDE, STEER_OTHERS)
    try:
        body = parse(Message, json_body(request))
    except BadRequest as e:
        return bad_request(e)
    # application/json input: an object, checked against the agent's input rules.
    kind = replies.JSON if "data" in body.model_fields_set else replies.TEXT
    try:
        thread = replies.provide_input(
            thread.pk, request.user, text=body.text, data=body.data, content_type=kind
        )
    except replies.BadInput as e:
        return bad_request(BadRequest(str(e), {e.field: str(e)}))
    except replies.NotWaiting as e:
        return error(
            409,
            "not_waiting_for_input",
            f"The thread is {e.args[0]}, not waiting for input.",
            status=str(e.args[0]),
        )
    return JsonResponse(thread_payload(thread), status=202)
