"""Decisions (resumeExecution): check a decision's body, record it, answer with the outcome;
one suspension a call, or up to 100 (POST /api/decisions), each decided by decide_one."""

import json
import logging
from dataclasses import dataclass
from typing import Any

from django.http import HttpRequest, JsonResponse

from access import ratelimits
from access.auth import api
from access.models import Scope
from agents import decisions, grants, policy, versions
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


def parse_decision(s: Suspension, data: dict[str, Any] | Resume) -> dict[str, Any]:
    """A resumeExecution body (approvals.api.bodies.Resume, or the body parsed by it) as
    agents.decisions takes it, checked against the suspension: a question is answered or
    declined, never approved, and edited arguments must fit the tool's schema as it was when
    the call was made."""
    decision = (data if isinstance(data, Resume) else parse(Resume, data)).decision()
    if "response" in decision and (s.presentation or {}).get("answer") == "form":
        _check_form_answer(s, decision["response"])
    if "approved" not in decision:
        return decision
    if s.kind == Suspension.Kind.INPUT and decision["approved"]:
        # An approval carries no answer, and the model would read an empty one.
        raise BadRequest(
            "This suspension asks a question: answer it, or decline with approved=false.",
            {"response": "Send the answer as response."},
        )
    modified = decision["modifiedArgs"]
    if modified is not None:
        errors = argcheck.field_errors(_tool_for(s).input_schema, modified)
        if errors:
            raise BadRequest(
                "The edited arguments do not fit the tool's input schema.",
                {f"modifiedArgs.{k}" if k else "modifiedArgs": v for k, v in errors.items()},
            )
    return decision


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
    body = {"suspension": suspension_payload(s), "outcome": s.outcome()}
    if status == 409:
        body = {"error": "already_decided", "detail": _conflict_detail(s), **body}
    return Answer(status, body)


def _conflict_detail(s: Suspension) -> str:
    if s.status == Suspension.Status.TIMED_OUT:
        verdict = "approved" if s.approved else "rejected"
        return f"The deadline passed first: it was {verdict} automatically."
    who = s.decided_by_name or "someone"
    return f"{who} already decided: {s.status}."


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
    return decide_one(s, request.user, data).response()


def decide_one(
    s: Suspension, user: Any, data: dict[str, Any] | Resume, step_up: dict[str, str] | None = None
) -> Answer:
    """One decision, checked and taken as resumeExecution takes it, for `user` (the caller,
    authorized and counted against the rate limit already): the body (parsed or not), the
    version binding (`seen`), then agents.decisions, which checks the policy (four eyes,
    groups, quorum votes, step-up) under its locks, in a transaction of its own. The answer
    says what happened to it (POST /api/decisions answers it per item). `step_up` is the
    proof of a passkey the page's view verified (approvals.stepup); no body carries one."""
    try:
        if not s.pending:
            # A repeat of the recorded decision is answered with it; anything else conflicts.
            decision = parse_decision(s, data)
            decision.pop("grant", None)
            return _outcome(s, 200 if decisions.same_decision(s, decision) else 409)
        decision = parse_decision(s, data)
        if step_up is not None:
            decision["step_up"] = step_up
        versions.check(s, decision)
    except BadRequest as e:
        return Answer(e.status, error_body(e.code, e.detail, e.fields))
    except versions.Unbound as e:
        return Answer(409, {"error": e.code, "detail": e.detail, "suspension": with_version(s)})
    try:
        if decision.get("ignore"):
            return _ignored(decisions.ignore(s, user))
        terms = decision.pop("grant", None)
        made = None
        if terms is not None:
            decided, made = grants.approve_and_grant(s, user, decision, terms)
        else:
            decided = decisions.decide(s, user, decision)
    except policy.Refused as e:
        # The policy the request was made under (agents.policy): who may not decide it, why.
        return Answer(403, error_body("forbidden_by_policy", e.detail, rule=e.rule))
    if decided.votes is not None:
        # A vote toward a quorum: recorded, and the request waits for more.
        body = {"suspension": suspension_payload(decided.suspension), "outcome": None}
        return Answer(202, {**body, "votes": decided.votes})
    if decided.created:
        answer = _outcome(decided.suspension, 202)
        if made is not None:
            answer.body["grant"] = grants.payload(made)
        return answer
    return _outcome(
        decided.suspension, 200 if decisions.same_decision(decided.suspension, decision) else 409
    )


def _ignored(done: decisions.Decided) -> Answer:
    """An ignore: 202 when this call dismissed it, 200 when it already was; 409 with the
    outcome when it was decided first (or its deadline passed)."""
    s = done.suspension
    if not s.pending:
        return _outcome(s, 409)
    body = {"suspension": suspension_payload(s), "outcome": None}
    return Answer(202 if done.created else 200, body)


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
    return JsonResponse({"results": [_decide_item(request.user, item) for item in asked.decisions]})


def _decide_item(user: Any, item: Decide) -> dict[str, Any]:
    """One item: counted against the rate limit as one resumeExecution call is, then decided
    as resumeExecution decides (decide_one); its answer with its suspension's id and status."""
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
                answer = decide_one(s, user, item.decision)
            except Exception:
                # What would have been a 500 of resumeExecution: this item's, not the others'
                # (each decision is its own transaction; those taken before stay taken).
                log.exception("deciding suspension %s of a list failed", s.pk)
                answer = Answer(500, error_body("server_error", FAILED))
    return {"id": item.suspension, "status": answer.status, **answer.body}
