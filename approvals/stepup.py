"""Approving a `step_up` request on its page: the passkey's challenge for that request, then
the decision with the reviewer's WebAuthn assertion, verified (access.passkeys) before the
decision is taken as resumeExecution takes it (approvals.api.decisions.answer_for, which
hands the proof to the door, agents.door.take), so the page keeps one decision path. Only a
reviewer's session reaches these views (Django's session and CSRF checks; a bearer token is
not read here), which is why the API, A2A and Slack cannot approve such a request: no body
of theirs carries a proof."""

from typing import Any

from django.http import HttpRequest, HttpResponse, JsonResponse

from access import passkeys, ratelimits
from approvals.api.decisions import answer_for
from approvals.api.suspensions import suspension_or_none
from approvals.http import (
    BadRequest,
    bad_request,
    json_body,
    not_found,
    parse_uuid,
    reviewer_post,
)
from infra.answers import error

# A passkey's JSON endpoints on the step-up and account pages.
reviewer_page = reviewer_post("use a passkey")


def _subject(suspension_id: Any) -> str:
    return f"approve:{suspension_id}"


@reviewer_page
def options(request: HttpRequest, thread_id: str, suspension_id: str) -> HttpResponse:
    """The options of navigator.credentials.get for approving this request, its challenge
    kept in the session for it alone."""
    thread_pk = parse_uuid(thread_id)
    s = suspension_or_none(suspension_id, thread_pk) if thread_pk else None
    if s is None:
        return not_found("suspension in this thread")
    try:
        found = passkeys.assertion_options(request.user, request.session, _subject(s.pk))
    except passkeys.Refused as e:
        return error(403, "no_passkey", e.detail)
    return HttpResponse(found, content_type="application/json")


@reviewer_page
def resume(request: HttpRequest, thread_id: str, suspension_id: str) -> JsonResponse:
    """{"decision": a resumeExecution body, "assertion": the browser's PublicKeyCredential}:
    the assertion verified for this request and reviewer, then the decision taken with its
    proof; the answer is resumeExecution's (a refused assertion: 403 `passkey_refused`)."""
    thread_pk = parse_uuid(thread_id)
    s = suspension_or_none(suspension_id, thread_pk) if thread_pk else None
    if s is None:
        return not_found("suspension in this thread")
    try:
        ratelimits.hit(ratelimits.DECISIONS, request.user)
    except ratelimits.Limited as e:
        return ratelimits.too_many(e)
    try:
        data = json_body(request)
    except BadRequest as e:
        return bad_request(e)
    decision, assertion = data.get("decision"), data.get("assertion")
    if not isinstance(decision, dict) or not isinstance(assertion, dict):
        fields = {"decision": "A resumeExecution body.", "assertion": "The passkey's answer."}
        return bad_request(BadRequest("Send the decision and the passkey's answer.", fields))
    try:
        used = passkeys.verify_assertion(request.user, request.session, _subject(s.pk), assertion)
    except passkeys.Refused as e:
        return error(403, "passkey_refused", e.detail)
    return answer_for(s, request.user, decision, proof=passkeys.proof(used)).response()
