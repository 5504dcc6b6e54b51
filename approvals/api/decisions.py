"""Decisions (resumeExecution): check a decision's body, record it, answer with the outcome."""

import json
from typing import Any

from django.conf import settings
from django.http import HttpRequest, JsonResponse

from access import ratelimits
from access.auth import api
from access.models import Scope
from agents import decisions, policy, versions
from agents.models import Suspension
from agents.payloads import suspension_payload
from agents.runtime.tools import Tool
from agents.runtime.tools import registry as tool_registry
from approvals import schemas as shapes
from approvals.api.suspensions import suspension_or_none, with_version
from approvals.http import (
    BadRequest,
    bad_request,
    error,
    json_body,
    not_found,
    parse_uuid,
    text_too_long,
)
from approvals.openapi import operation


def _tool_for(s: Suspension) -> Tool:
    """The tool as it was when the call was made: its stored schema is what edits must meet."""
    known = tool_registry.get(s.tool_name)
    return Tool(
        name=s.tool_name,
        description=known.description if known else "",
        input_schema=s.tool_schema or {"type": "object"},
    )


BINDING = ("seen", "confirmVersionChange")


def parse_binding(data: dict[str, Any]) -> dict[str, Any]:
    """What a decision says it answers (agents.versions): `seen` = {"args_hash",
    "agent_version"} as the card showed them, and `confirmVersionChange`."""
    binding: dict[str, Any] = {}
    fields = {}
    seen = data.get("seen")
    if seen is not None:
        if not isinstance(seen, dict) or set(seen) - {"args_hash", "agent_version"}:
            fields["seen"] = "An object with args_hash and agent_version, as the request showed."
        elif seen.get("args_hash") is not None and not isinstance(seen["args_hash"], str):
            fields["seen.args_hash"] = "The request's args_hash, a string."
        elif seen.get("agent_version") is not None and (
            isinstance(seen["agent_version"], bool) or not isinstance(seen["agent_version"], int)
        ):
            fields["seen.agent_version"] = "The request's agent_version, a whole number."
        else:
            binding["seen"] = seen
    confirm = data.get("confirmVersionChange")
    if confirm is not None:
        if not isinstance(confirm, bool):
            fields["confirmVersionChange"] = "Send true or false."
        else:
            binding["confirmVersionChange"] = confirm
    if fields:
        raise BadRequest("The decision is not valid.", fields)
    return binding


def parse_decision(s: Suspension, data: dict[str, Any]) -> dict[str, Any]:
    """Check a resumeExecution body against the suspension's kind and the tool's schema."""
    binding = parse_binding(data)
    data = {k: v for k, v in data.items() if k not in BINDING}
    return {**_parse_decision(s, data), **binding}


def _parse_decision(s: Suspension, data: dict[str, Any]) -> dict[str, Any]:
    if "ignore" in data:
        # Dismiss from the inbox without deciding (agents.decisions.ignore).
        unknown = set(data) - {"ignore"}
        if unknown:
            raise BadRequest("Unknown fields.", {k: "Unknown field." for k in unknown})
        if data["ignore"] is not True:
            raise BadRequest("Send ignore: true, alone.", {"ignore": "Send true."})
        return {"ignore": True}
    if "response" in data:
        # The answer to a question, or a reviewer's response to a confirmation whose policy
        # allows it (agents.policy allow_respond, checked by agents.decisions.decide).
        unknown = set(data) - {"response"}
        if unknown:
            raise BadRequest("Unknown fields.", {k: "Unknown field." for k in unknown})
        if not isinstance(data["response"], str) or not data["response"].strip():
            raise BadRequest("The answer is empty.", {"response": "Write an answer."})
        if too_long := text_too_long(data["response"], settings.MAX_MESSAGE_CHARS):
            raise BadRequest("The answer is too long.", {"response": too_long})
        return {"response": data["response"]}
    unknown = set(data) - {"approved", "reason", "modifiedArgs"}
    if unknown:
        raise BadRequest("Unknown fields.", {k: "Unknown field." for k in unknown})
    fields = {}
    if not isinstance(data.get("approved"), bool):
        fields["approved"] = "Send true or false."
    reason = data.get("reason")
    if reason is not None and not isinstance(reason, str):
        fields["reason"] = "A string."
    elif too_long := text_too_long(reason, settings.MAX_REASON_CHARS):
        fields["reason"] = too_long
    modified = data.get("modifiedArgs")
    if modified is not None and not isinstance(modified, dict):
        fields["modifiedArgs"] = "A JSON object of the tool's arguments."
    elif modified is not None and (size := _json_size(modified)) > settings.MAX_ARGUMENTS_BYTES:
        fields["modifiedArgs"] = (
            f"At most {settings.MAX_ARGUMENTS_BYTES} bytes as JSON (these are {size})."
        )
    if fields:
        raise BadRequest("The decision is not valid.", fields)
    if s.kind == Suspension.Kind.INPUT and data["approved"]:
        # An approval carries no answer, and the model would read an empty one.
        raise BadRequest(
            "This suspension asks a question: answer it, or decline with approved=false.",
            {"response": "Send the answer as response."},
        )
    if modified is not None:
        if not data["approved"]:
            raise BadRequest(
                "modifiedArgs goes with an approval.",
                {"modifiedArgs": "Only an approval can edit the arguments."},
            )
        errors = _tool_for(s).validate(modified)
        if errors:
            raise BadRequest(
                "The edited arguments do not fit the tool's input schema.",
                {f"modifiedArgs.{k}" if k else "modifiedArgs": v for k, v in errors.items()},
            )
    return {"approved": data["approved"], "reason": reason or "", "modifiedArgs": modified}


def _json_size(value: Any) -> int:
    """Bytes of `value` as compact UTF-8 JSON, so the limit does not depend on the escaping
    or spacing the client chose."""
    return len(json.dumps(value, ensure_ascii=False, separators=(",", ":")).encode())


def _outcome(s: Suspension, status: int) -> JsonResponse:
    body = {"suspension": suspension_payload(s), "outcome": s.outcome()}
    if status == 409:
        body = {"error": "already_decided", "detail": _conflict_detail(s), **body}
    return JsonResponse(body, status=status)


def _conflict_detail(s: Suspension) -> str:
    if s.status == Suspension.Status.TIMED_OUT:
        verdict = "approved" if s.approved else "rejected"
        return f"The deadline passed first: it was {verdict} automatically."
    who = s.decided_by_name or "someone"
    return f"{who} already decided: {s.status}."


@operation(
    "POST",
    "Decide a suspension (resumeExecution)",
    body=shapes.Resume,
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
        if not s.pending:
            # A repeat of the recorded decision is answered with it; anything else conflicts.
            decision = parse_decision(s, data)
            return _outcome(s, 200 if decisions.same_decision(s, decision) else 409)
        decision = parse_decision(s, data)
        versions.check(s, decision)
    except BadRequest as e:
        return bad_request(e)
    except versions.Unbound as e:
        return JsonResponse(
            {"error": e.code, "detail": e.detail, "suspension": with_version(s)}, status=409
        )
    try:
        if decision.get("ignore"):
            return _ignored(decisions.ignore(s, request.user))
        decided = decisions.decide(s, request.user, decision)
    except policy.Refused as e:
        # The policy the request was made under (agents.policy): who may not decide it, why.
        return error(403, "forbidden_by_policy", e.detail, rule=e.rule)
    if decided.votes is not None:
        # A vote toward a quorum: recorded, and the request waits for more.
        body = {"suspension": suspension_payload(decided.suspension), "outcome": None}
        return JsonResponse({**body, "votes": decided.votes}, status=202)
    if decided.created:
        return _outcome(decided.suspension, 202)
    return _outcome(
        decided.suspension, 200 if decisions.same_decision(decided.suspension, decision) else 409
    )


def _ignored(done: decisions.Decided) -> JsonResponse:
    """An ignore: 202 when this call dismissed it, 200 when it already was; 409 with the
    outcome when it was decided first (or its deadline passed)."""
    s = done.suspension
    if not s.pending:
        return _outcome(s, 409)
    body = {"suspension": suspension_payload(s), "outcome": None}
    return JsonResponse(body, status=202 if done.created else 200)
