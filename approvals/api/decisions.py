"""Decisions (resumeExecution): check a decision's body, record it, answer with the outcome;
one suspension a call, or up to 100 (POST /api/decisions), each taken by the door
(agents.door.take) and its outcome said in the API's words (`answer_for`)."""

import json
import logging
from dataclasses import dataclass
from typing import Any, assert_never

from django.http import HttpRequest, JsonResponse

from access import ratelimits
from access.auth import api
from access.models import Scope
from agents import door, grants
from agents.models import Suspension
from agents.payloads import suspension_payload
from agents.runtime.tools import Tool
from agents.runtime.tools import registry as tool_registry
from approvals import argcheck
from approvals import schemas as shapes
from approvals.api.bodies import Decide, Decisions, Resume
from approvals.api.suspensions import suspension_or_none, with_version
from approvals.contract import parse
from approvals.http import BadRequest, bad_request, json_body, not_found, parse_uuid
from approvals.openapi import operation
from infra.answers import error_body

log = logging.getLogger(__name__)

FAILED = "The server failed to decide this one; try it again."


def _tool_for(s: Suspension) -> Tool:
    """The tool as it was when the call was made: its stored schema is what edits must meet."""
    known = tool_registry.get(s.tool_name)
    return Tool(
        name=s.tool_name,
        description=known.description if known else "",
        input_schema=s.tool_schema or {"type": "object"},
    )


def parse_decision(s: Suspension, data: dict[str, Any] | Resume) -> door.Decision:
    """A resumeExecution body (approvals.api.bodies.Resume, or the body parsed by it) as the
    door takes it (agents.door.Decision), checked against the suspension: a question is
    answered or declined, never approved, and edited arguments must fit the tool's schema as
    it was when the call was made. Raises BadRequest in the API's words."""
    body = data if isinstance(data, Resume) else parse(Resume, data)
    decision = _decision_of(body)
    if decision.kind is door.Kind.RESPOND and (s.presentation or {}).get("answer") == "form":
        _check_form_answer(s, decision.answer or "")
    if s.kind == Suspension.Kind.INPUT and decision.kind is door.Kind.APPROVE:
        # An approval carries no answer, and the model would read an empty one.
        raise BadRequest(
            "This suspension asks a question: answer it, or decline with approved=false.",
            {"response": "Send the answer as response."},
        )
    if decision.arguments is not None:
        errors = argcheck.field_errors(_tool_for(s).input_schema, decision.arguments)
        if errors:
            raise BadRequest(
                "The edited arguments do not fit the tool's input schema.",
                {f"modifiedArgs.{k}" if k else "modifiedArgs": v for k, v in errors.items()},
            )
    return decision


def _decision_of(body: Resume) -> door.Decision:
    """The body's one kind of decision, with what the card showed (`seen`)."""
    seen = door.Seen(**body.seen.model_dump(exclude_unset=True)) if body.seen else None
    confirmed = bool(body.confirmVersionChange)
    if body.ignore:
        return door.Decision.ignore(seen=seen, confirm_version_change=confirmed)
    if body.response is not None:
        return door.Decision.respond(body.response, seen=seen, confirm_version_change=confirmed)
    if not body.approved:
        return door.Decision.reject(body.reason or "", seen=seen, confirm_version_change=confirmed)
    return door.Decision.approve(
        body.reason or "",
        arguments=body.modifiedArgs,
        grant=body.grant.terms() if body.grant is not None else None,
        seen=seen,
        confirm_version_change=confirmed,
    )


def _check_form_answer(s: Suspension, response: str) -> None:
    """A question asked with a form (an MCP upstream's elicitation: mcp_gateway.elicitation)
    takes a JSON object that fits its schema, checked now, while the reviewer can fix it."""
    try:
        answer = json.loads(response)
    except ValueError:
        answer = None
    errors = argcheck.field_errors(s.tool_schema or {"type": "object"}, answer)
    if errors:
        raise BadRequest(
            "The answer does not fit the form: send a JSON object of its fields.",
            {f"response.{k}" if k else "response": v for k, v in errors.items()},
        )


@dataclass(frozen=True)
class Answer:
    """What resumeExecution answers for one suspension: its HTTP status and its body."""

    status: int
    body: dict[str, Any]

    def response(self) -> JsonResponse:
        return JsonResponse(self.body, status=self.status)


def _outcome(s: Suspension, status: int) -> Answer:
    return Answer(status, {"suspension": suspension_payload(s), "outcome": s.outcome()})


@operation(
    "POST",
    "Decide a suspension (resumeExecution)",
    body=Resume,
    responses={200: shapes.Outcome, 202: shapes.Outcome},
    errors=(409,),
    description="Record the decision (202) and a worker resumes the frame; the same decision "
    "again answers 200 with the recorded outcome, another one, a passed deadline or a stale "
    "view 409; arguments that fail the tool's schema 400; refused by the policy 403.",
)
@api(["POST"], perm="agents.decide_suspension", scope=Scope.DECIDE, limit=ratelimits.DECISIONS)
def resume(request: HttpRequest, thread_id: str, suspension_id: str) -> JsonResponse:
    """resumeExecution: record the decision; a worker resumes the frame after commit."""
    thread_pk = parse_uuid(thread_id)
    s = suspension_or_none(suspension_id, thread_pk) if thread_pk else None
    if s is None:
        return not_found("suspension in this thread")
    try:
        data = json_body(request)
    except BadRequest as e:
        return bad_request(e)
    return answer_for(s, request.user, data).response()


def answer_for(
    s: Suspension, user: Any, data: dict[str, Any] | Resume, proof: dict[str, str] | None = None
) -> Answer:
    """resumeExecution's answer for one decision, for `user` (the caller, authorized and
    counted against the rate limit already): the body checked (parse_decision), then taken
    by the door (agents.door.take: the version binding, a grant, the policy, the locks, the
    events), its outcome in the API's words. POST /api/decisions answers it per item;
    `proof` is the passkey the step-up page verified (approvals.stepup); no body carries one."""
    try:
        decision = parse_decision(s, data)
    except BadRequest as e:
        return Answer(e.status, error_body(e.code, e.detail, e.fields))
    return said(door.take(s, user, decision, proof=proof), decision)


def said(outcome: door.Outcome, decision: door.Decision) -> Answer:
    """An outcome in the API's words: 202 taken (or a vote), 200 a repeat, 409 a conflict or
    a decision on another view, 403 refused by the policy (with its rule)."""
    match outcome:
        case door.Decided(s, made):
            if decision.kind is door.Kind.IGNORE:
                return Answer(202, {"suspension": suspension_payload(s), "outcome": None})
            taken = _outcome(s, 202)
            if made is not None:
                taken.body["grant"] = grants.payload(made)
            return taken
        case door.Voted(s, votes):
            body = {"suspension": suspension_payload(s), "outcome": None, "votes": votes}
            return Answer(202, body)
        case door.Repeat(s):
            if decision.kind is door.Kind.IGNORE:
                return Answer(200, {"suspension": suspension_payload(s), "outcome": None})
            return _outcome(s, 200)
        case door.Conflict(s, _, detail):
            body = {"suspension": suspension_payload(s), "outcome": s.outcome()}
            return Answer(409, {"error": "already_decided", "detail": detail, **body})
        case door.Refused(_, rule, detail):
            # The policy the request was made under (agents.policy): who may not decide it, why.
            return Answer(403, error_body("forbidden_by_policy", detail, rule=rule))
        case door.Unbound(s, code, detail):
            return Answer(409, {"error": code, "detail": detail, "suspension": with_version(s)})
    assert_never(outcome)


@operation(
    "POST",
    "Decide several suspensions",
    body=Decisions,
    responses={200: shapes.DecisionResults},
    errors=(429,),
    description="Each item is decided as resumeExecution would decide it alone: the same "
    "checks (its body, the policy: four eyes, groups, a quorum's votes; the version binding; "
    "the rate limit, counted per item), in a transaction of its own, audited with the same "
    "events; one refused item changes nothing for the others. The answer is 200 with "
    "`results` in the order of the request, one per item: `id` (its suspension, as sent), "
    "`status` (what resumeExecution would have answered: 202, 200, 400, 403, 404, 409 or "
    "429; 500 when the server failed on that one), and that answer's body: `suspension` and "
    "`outcome` (with `votes` for a quorum's vote) when taken, `error`, `detail` (and "
    "`fields`, `rule`, `retry_after`) when refused. A list that is empty, longer than 100, "
    "names a suspension twice or holds a malformed item is refused whole (400, `fields` "
    "keyed like `decisions.3.suspension`), nothing decided; it counts as one decision "
    "against the rate limit (429 when over it).",
)
@api(["POST"], perm="agents.decide_suspension", scope=Scope.DECIDE)
def decide_many(request: HttpRequest) -> JsonResponse:
    """Decide up to 100 suspensions in one call, each as resumeExecution would."""
    try:
        asked = parse(Decisions, json_body(request))
    except BadRequest as e:
        # Refused whole: one call counted, as a refused resumeExecution is.
        try:
            ratelimits.hit(ratelimits.DECISIONS, request.user)
        except ratelimits.Limited as limited:
            return ratelimits.too_many(limited)
        return bad_request(e)
    return JsonResponse({"results": [_answer_item(request.user, item) for item in asked.decisions]})


def _answer_item(user: Any, item: Decide) -> dict[str, Any]:
    """One item: counted against the rate limit as one resumeExecution call is, then decided
    as resumeExecution decides (`answer_for`); its answer with its suspension's id and status."""
    try:
        ratelimits.hit(ratelimits.DECISIONS, user)
    except ratelimits.Limited as e:
        answer = Answer(429, error_body(e.code, e.detail, retry_after=e.retry_after))
    else:
        s = suspension_or_none(item.suspension)
        if s is None:
            answer = Answer(404, error_body("not_found", "No such suspension."))
        else:
            try:
                answer = answer_for(s, user, item.decision)
            except Exception:
                # What would have been a 500 of resumeExecution: this item's, not the others'
                # (each decision is its own transaction; those taken before stay taken).
                log.exception("deciding suspension %s of a list failed", s.pk)
                answer = Answer(500, error_body("server_error", FAILED))
    return {"id": item.suspension, "status": answer.status, **answer.body}
