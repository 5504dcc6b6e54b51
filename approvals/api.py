"""The public JSON API of design.md: thin views that parse, authorize and call one action."""

import base64
import binascii
from datetime import datetime
from typing import Any

from django.db.models import Max, Q
from django.http import HttpRequest, JsonResponse

from agents import actions
from agents.actions import suspension_payload
from agents.models import AgentDefinition, Event, StackFrame, Suspension, Thread
from agents.runtime.tools import Tool
from agents.runtime.tools import registry as tool_registry
from approvals.auth import api
from approvals.http import BadRequest, error, json_body, parse_uuid, whole_number

PAGE_SIZE = 50
MAX_PAGE_SIZE = 200


def thread_payload(thread: Thread) -> dict[str, Any]:
    frames = list(thread.frames.filter(status=StackFrame.Status.ACTIVE).order_by("depth"))
    pending = thread.suspensions.filter(status=Suspension.Status.PENDING).select_related(
        "decided_by"
    )
    return {
        "id": str(thread.id),
        "agent": thread.agent.name,
        "status": thread.status,
        "title": thread.title,
        "result": thread.result,
        "error": thread.error,
        "created_by": thread.created_by.username if thread.created_by else None,
        "created_at": thread.created_at.isoformat(),
        "updated_at": thread.updated_at.isoformat(),
        "stack": [
            {
                "id": f.pk,
                "agent": f.agent_name,
                "type": f.agent_type,
                "label": f.label,
                "depth": f.depth,
                "iteration": f.iteration,
                "max_iterations": f.max_iterations,
                "parent_tool_use_id": f.parent_tool_use_id or None,
            }
            for f in frames
        ],
        "pending_suspensions": [suspension_payload(s) for s in pending],
        "last_event_id": thread.events.aggregate(m=Max("id"))["m"],
    }


def _thread_or_404(thread_id: str) -> Thread | None:
    pk = parse_uuid(thread_id)
    if pk is None:
        return None
    return Thread.objects.select_related("agent", "created_by").filter(pk=pk).first()


def _not_found(what: str) -> JsonResponse:
    return error(404, "not_found", f"No such {what}.")


def _bad(e: BadRequest) -> JsonResponse:
    return error(e.status, e.code, e.detail, e.fields)


@api(["GET", "POST"], perm=None)
def threads(request: HttpRequest) -> JsonResponse:
    if request.method == "GET":
        if not request.user.has_perm("agents.view_thread"):
            return error(403, "forbidden", "You do not have permission to do this.")
        rows = Thread.objects.select_related("agent").order_by("-created_at")[:50]
        return JsonResponse(
            {
                "results": [
                    {
                        "id": str(t.id),
                        "agent": t.agent.name,
                        "status": t.status,
                        "title": t.title,
                        "created_at": t.created_at.isoformat(),
                    }
                    for t in rows
                ]
            }
        )
    if not request.user.has_perm("agents.add_thread"):
        return error(403, "forbidden", "You do not have permission to start runs.")
    try:
        data = json_body(request)
        fields = {}
        name, message = data.get("agent"), data.get("message")
        if not isinstance(name, str) or not name:
            fields["agent"] = "Name the agent to run."
        if not isinstance(message, str) or not message.strip():
            fields["message"] = "Write the first message."
        unknown = set(data) - {"agent", "message"}
        for key in unknown:
            fields[key] = "Unknown field."
        agent = AgentDefinition.objects.filter(name=name).first() if "agent" not in fields else None
        if "agent" not in fields and agent is None:
            fields["agent"] = f"No agent named {name!r}."
        if fields:
            raise BadRequest("The run cannot start.", fields)
    except BadRequest as e:
        return _bad(e)
    thread = actions.start_thread(agent, message, request.user)
    return JsonResponse(thread_payload(thread), status=201)


@api(["GET"], perm="agents.view_thread")
def thread_detail(request: HttpRequest, thread_id: str) -> JsonResponse:
    thread = _thread_or_404(thread_id)
    if thread is None:
        return _not_found("thread")
    return JsonResponse(thread_payload(thread))


@api(["POST"], perm="agents.add_thread")
def thread_messages(request: HttpRequest, thread_id: str) -> JsonResponse:
    thread = _thread_or_404(thread_id)
    if thread is None:
        return _not_found("thread")
    try:
        data = json_body(request)
        text = data.get("text")
        if not isinstance(text, str) or not text.strip():
            raise BadRequest("The message is empty.", {"text": "Write a message."})
    except BadRequest as e:
        return _bad(e)
    try:
        thread = actions.post_message(thread.pk, text, request.user)
    except actions.NotWaiting as e:
        return error(
            409,
            "not_waiting_for_input",
            f"The thread is {e.args[0]}, not waiting for input.",
            status=str(e.args[0]),
        )
    return JsonResponse(thread_payload(thread), status=202)


@api(["POST"], perm="agents.change_thread")
def thread_cancel(request: HttpRequest, thread_id: str) -> JsonResponse:
    thread = _thread_or_404(thread_id)
    if thread is None:
        return _not_found("thread")
    try:
        thread = actions.cancel_thread(thread.pk, request.user)
    except actions.AlreadyFinished as e:
        return error(
            409,
            "already_finished",
            f"The thread has already ended ({e.args[0]}).",
            status=str(e.args[0]),
        )
    return JsonResponse(thread_payload(Thread.objects.get(pk=thread.pk)))


def _encode_cursor(s: Suspension) -> str:
    return base64.urlsafe_b64encode(f"{s.created_at.isoformat()}|{s.id}".encode()).decode()


def _decode_cursor(cursor: str) -> tuple[datetime, Any]:
    try:
        created, pk = base64.urlsafe_b64decode(cursor.encode()).decode().split("|")
        parsed = datetime.fromisoformat(created)
    except (ValueError, binascii.Error, UnicodeDecodeError) as e:
        raise BadRequest(
            "The cursor is not valid.", {"cursor": "Use the 'next' link as given."}
        ) from e
    if parse_uuid(pk) is None:
        raise BadRequest("The cursor is not valid.", {"cursor": "Use the 'next' link as given."})
    return parsed, pk


def _limit(request: HttpRequest) -> int:
    limit = whole_number(request.GET.get("limit", str(PAGE_SIZE)))
    if limit is None or not 1 <= limit <= MAX_PAGE_SIZE:
        raise BadRequest("Bad limit.", {"limit": f"A whole number from 1 to {MAX_PAGE_SIZE}."})
    return limit


@api(["GET"], perm="agents.view_suspension")
def suspensions(request: HttpRequest) -> JsonResponse:
    """Oldest first, a page at a time; `next` carries a keyset cursor."""
    q = request.GET
    rows = Suspension.objects.select_related("decided_by")
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
        limit = _limit(request)
        if q.get("cursor"):
            created, pk = _decode_cursor(q["cursor"])
            rows = rows.filter(Q(created_at__gt=created) | Q(created_at=created, id__gt=pk))
    except BadRequest as e:
        return _bad(e)
    page = list(rows.order_by("created_at", "id")[: limit + 1])
    more = len(page) > limit
    page = page[:limit]
    next_url = None
    if more:
        params = q.copy()
        params["cursor"] = _encode_cursor(page[-1])
        next_url = f"{request.path}?{params.urlencode()}"
    return JsonResponse({"results": [suspension_payload(s) for s in page], "next": next_url})


def _suspension_or_none(suspension_id: str, thread_id: Any = None) -> Suspension | None:
    pk = parse_uuid(suspension_id)
    if pk is None:
        return None
    rows = Suspension.objects.select_related("decided_by")
    if thread_id is not None:
        rows = rows.filter(thread_id=thread_id)
    return rows.filter(pk=pk).first()


@api(["GET"], perm="agents.view_suspension")
def suspension_detail(request: HttpRequest, suspension_id: str) -> JsonResponse:
    s = _suspension_or_none(suspension_id)
    if s is None:
        return _not_found("suspension")
    return JsonResponse(suspension_payload(s))


def _tool_for(s: Suspension) -> Tool:
    """The tool as it was when the call was made: its stored schema is what edits must meet."""
    known = tool_registry.get(s.tool_name)
    return Tool(
        name=s.tool_name,
        description=known.description if known else "",
        input_schema=s.tool_schema or {"type": "object"},
    )


def parse_decision(s: Suspension, data: dict[str, Any]) -> dict[str, Any]:
    """Check a resumeExecution body against the suspension's kind and the tool's schema."""
    if "response" in data:
        unknown = set(data) - {"response"}
        if unknown:
            raise BadRequest("Unknown fields.", {k: "Unknown field." for k in unknown})
        if s.kind != Suspension.Kind.INPUT:
            raise BadRequest(
                "This suspension asks for a decision, not an answer.",
                {"response": "Send approved (and reason or modifiedArgs) instead."},
            )
        if not isinstance(data["response"], str) or not data["response"].strip():
            raise BadRequest("The answer is empty.", {"response": "Write an answer."})
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
    modified = data.get("modifiedArgs")
    if modified is not None and not isinstance(modified, dict):
        fields["modifiedArgs"] = "A JSON object of the tool's arguments."
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


def _outcome(s: Suspension, status: int) -> JsonResponse:
    body = {"suspension": suspension_payload(s), "outcome": s.outcome()}
    if status == 409:
        body = {"error": "already_decided", "detail": _conflict_detail(s), **body}
    return JsonResponse(body, status=status)


def _conflict_detail(s: Suspension) -> str:
    if s.status == Suspension.Status.TIMED_OUT:
        verdict = "approved" if s.approved else "rejected"
        return f"The deadline passed first: it was {verdict} automatically."
    who = s.decided_by.username if s.decided_by else "someone"
    return f"{who} already decided: {s.status}."


@api(["POST"], perm="agents.decide_suspension")
def resume(request: HttpRequest, thread_id: str, suspension_id: str) -> JsonResponse:
    """resumeExecution: record the decision; a worker resumes the frame after commit."""
    thread_pk = parse_uuid(thread_id)
    s = _suspension_or_none(suspension_id, thread_pk) if thread_pk else None
    if s is None:
        return _not_found("suspension in this thread")
    try:
        data = json_body(request)
        if not s.pending:
            # A repeat of the recorded decision is answered with it; anything else conflicts.
            decision = parse_decision(s, data)
            return _outcome(s, 200 if actions.same_decision(s, decision) else 409)
        decision = parse_decision(s, data)
    except BadRequest as e:
        return _bad(e)
    decided = actions.decide(s, request.user, decision)
    if decided.created:
        return _outcome(decided.suspension, 202)
    return _outcome(
        decided.suspension, 200 if actions.same_decision(decided.suspension, decision) else 409
    )


@api(["GET"], perm="agents.view_thread")
def event_list(request: HttpRequest) -> JsonResponse:
    q = request.GET
    after = whole_number(q.get("after", "0"))
    if after is None:
        return error(400, "invalid", "Bad cursor.", {"after": "An event id (a whole number)."})
    try:
        limit = _limit(request) if "limit" in q else MAX_PAGE_SIZE
    except BadRequest as e:
        return _bad(e)
    rows = Event.objects.filter(id__gt=after).select_related("actor").order_by("id")
    if q.get("thread"):
        pk = parse_uuid(q["thread"])
        if pk is None:
            return error(400, "invalid", "Bad thread id.", {"thread": "A thread id (UUID)."})
        rows = rows.filter(thread_id=pk)
    page = list(rows[:limit])
    return JsonResponse(
        {
            "events": [
                {**e.as_message(), "actor": e.actor.username if e.actor else None} for e in page
            ],
            "last_id": page[-1].id if page else after,
        }
    )
