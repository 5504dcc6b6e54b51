"""The public JSON API of design.md: thin views that parse, authorize and call one action."""

import base64
import binascii
import json
import uuid
from datetime import datetime
from typing import Any

from django.conf import settings
from django.db.models import Max, Q, Sum
from django.http import HttpRequest, JsonResponse

from agents import cancelling, decisions, policy, replies, starting, versions
from agents.models import AgentDefinition, Event, LiveText, StackFrame, Suspension, Thread
from agents.payloads import suspension_payload
from agents.runtime.tools import Tool
from agents.runtime.tools import registry as tool_registry
from approvals import admission, ratelimits, scopes
from approvals import schemas as shapes
from approvals.auth import api
from approvals.http import (
    BadRequest,
    error,
    json_body,
    parse_uuid,
    row_id,
    text_too_long,
    whole_number,
)
from approvals.models import Scope
from approvals.openapi import operation
from gateway.compiled import Compiled, fields

PAGE_SIZE = 50
MAX_PAGE_SIZE = 200


def waiting_for_person() -> Q:
    """Threads a person must act on: waiting for a reply, or with a pending suspension."""
    return Q(status=Thread.Status.WAITING_INPUT) | Q(
        status__in=(Thread.Status.SUSPENDED, Thread.Status.RUNNING),
        suspensions__status=Suspension.Status.PENDING,
    )


def thread_payload(thread: Thread) -> dict[str, Any]:
    started = getattr(thread, "started", None)
    if started is not None:
        # Made by this request (agents.actions.start_thread): what it wrote is the whole
        # thread, so it is answered without reading it back (six statements fewer per start).
        frame, event = started
        return _thread_payload(thread, [frame], [], [], EMPTY_USAGE, [], event.id)
    # The stack the user talks to; agent instances are listed under "instances".
    frames = list(
        thread.frames.filter(status=StackFrame.Status.ACTIVE, lane__isnull=True).order_by("depth")
    )
    pending = thread.suspensions.filter(status=Suspension.Status.PENDING)
    return _thread_payload(
        thread,
        frames,
        [suspension_payload(s) for s in pending],
        thread_instances(thread),
        thread_usage(thread),
        thread_live(thread),
        thread.events.aggregate(m=Max("id"))["m"],
    )


EMPTY_USAGE = {"input_tokens": 0, "output_tokens": 0}


def _thread_payload(
    thread: Thread,
    frames: list[StackFrame],
    pending: list[dict[str, Any]],
    instances: list[dict[str, Any]],
    usage: dict[str, Any],
    live: list[dict[str, Any]],
    last_event_id: int | None,
) -> dict[str, Any]:
    if usage is EMPTY_USAGE:
        usage = {**EMPTY_USAGE, "by_agent": {f.agent_name: dict(EMPTY_USAGE) for f in frames}}
    return {
        "id": str(thread.id),
        "agent": thread.agent.name,
        "status": thread.status,
        "title": thread.title,
        "result": thread.result,
        "error": thread.error,
        "created_by": thread.created_by_name or None,
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
        "pending_suspensions": pending,
        "instances": instances,
        "usage": usage,
        "live": live,
        "last_event_id": last_event_id,
    }


# An instance's status as the thread page names it (frame statuses, and "waiting for approval"
# for an active instance with a pending suspension in its lane).
INSTANCE_STATUS = {
    StackFrame.Status.ACTIVE: "running",
    StackFrame.Status.COMPLETED: "done",
    StackFrame.Status.FAILED: "failed",
    StackFrame.Status.CANCELLED: "cancelled",
}
WAITING = "waiting for approval"


def thread_instances(thread: Thread) -> list[dict[str, Any]]:
    """Every agents-as-tools instance of the thread, oldest first, with the ids of the pending
    suspensions in its lane (the page merges those with the events it gets later)."""
    frames = list(
        thread.frames.filter(instance__gt=0)
        .order_by("created_at", "id")
        .only(
            "thread",  # the related manager sets it on each row
            "agent_name",
            "agent_type",
            "instance",
            "status",
            "created_at",
            "finished_at",
            "tools_used",
            "input_tokens",
            "output_tokens",
            "parent",
            "parent_tool_use_id",
        )
    )
    if not frames:
        return []
    pending: dict[int, list[str]] = {}
    rows = thread.suspensions.filter(status=Suspension.Status.PENDING, frame__lane__isnull=False)
    for pk, lane in rows.values_list("id", "frame__lane"):
        pending.setdefault(lane, []).append(str(pk))
    found = []
    for f in frames:
        status = INSTANCE_STATUS.get(f.status, f.status)
        if status == "running" and pending.get(f.pk):
            status = WAITING
        duration = None
        if f.finished_at is not None:
            duration = int((f.finished_at - f.created_at).total_seconds() * 1000)
        found.append(
            {
                "id": f.pk,
                "name": f.instance_name,
                "agent": f.agent_name,
                "index": f.instance,
                "status": status,
                "started_at": f.created_at.isoformat(),
                "finished_at": f.finished_at.isoformat() if f.finished_at else None,
                "duration_ms": duration,
                "tools": list(f.tools_used),
                "input_tokens": f.input_tokens,
                "output_tokens": f.output_tokens,
                "parent_frame_id": f.parent_id,
                "tool_use_id": f.parent_tool_use_id or None,
                "pending_suspensions": pending.get(f.pk, []),
            }
        )
    return found


def thread_usage(thread: Thread) -> dict[str, Any]:
    """The model's tokens over every frame of the thread, in total and per agent."""
    rows = (
        thread.frames.order_by("agent_name")
        .values("agent_name")
        .annotate(input_tokens=Sum("input_tokens"), output_tokens=Sum("output_tokens"))
    )
    by_agent = {
        r["agent_name"]: {"input_tokens": r["input_tokens"], "output_tokens": r["output_tokens"]}
        for r in rows
    }
    return {
        "input_tokens": sum(u["input_tokens"] for u in by_agent.values()),
        "output_tokens": sum(u["output_tokens"] for u in by_agent.values()),
        "by_agent": by_agent,
    }


def thread_live(thread: Thread) -> list[dict[str, Any]]:
    """What the models of the thread are writing now (agents.streaming), a frame at a time."""
    rows = (
        LiveText.objects.filter(thread=thread)
        .select_related("frame")
        .only(
            "seq",
            "text",
            "activity",
            "frame__agent_type",
            "frame__agent_name",
            "frame__instance",
            "frame__lane",
        )
        .order_by("frame_id")
    )
    return [
        {
            "frame_id": r.frame_id,
            "frame": r.frame.label,
            "lane": r.frame.lane_id,
            "text": r.text,
            "activity": r.activity,
            "seq": r.seq,
        }
        for r in rows
    ]


def _thread_or_404(thread_id: str) -> Thread | None:
    pk = parse_uuid(thread_id)
    if pk is None:
        return None
    return Thread.objects.select_related("agent").filter(pk=pk).first()


def _not_found(what: str) -> JsonResponse:
    return error(404, "not_found", f"No such {what}.")


def _bad(e: BadRequest) -> JsonResponse:
    return error(e.status, e.code, e.detail, e.fields)


# A runs-only token sees its user's own runs (approvals.scopes); these say so when it asks
# for another's.
SEE_OTHERS = "This token may read only the runs its user started: another's needs read."
STEER_OTHERS = "This token may steer only the runs its user started: another's needs decide."


def _visible_threads(request: HttpRequest, rows: Any, field: str = "created_by") -> Any:
    """`rows` as the caller may list them: all, or a runs-only token's own runs."""
    if scopes.own_runs_only(request.user):
        return rows.filter(**{field: request.user})
    return rows


@operation(
    "POST",
    "Start a run",
    body=shapes.StartRun,
    responses={201: shapes.Thread},
    description="Start a run of an agent; a worker runs it. 429 when too many are started too "
    "fast or the agent has MAX_PENDING_PER_AGENT requests waiting.",
)
@operation(
    "GET",
    "List runs",
    query=shapes.ThreadQuery,
    responses={200: shapes.ThreadPage},
    description="Newest first, a page at a time: follow `next` (a keyset cursor). A token "
    "without the read scope lists only the runs its user started.",
)
@api(
    ["GET", "POST"],
    perm=None,
    scope={"GET": (Scope.READ, Scope.RUNS), "POST": Scope.RUNS},
    limit=ratelimits.RUNS,
)
def threads(request: HttpRequest) -> JsonResponse:
    if request.method == "GET":
        if not request.user.has_perm("agents.view_thread"):
            return error(403, "forbidden", "You do not have permission to do this.")
        return _thread_list(request)
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
        elif too_long := text_too_long(message, settings.MAX_MESSAGE_CHARS):
            fields["message"] = too_long
        unknown = set(data) - {"agent", "message"}
        for key in unknown:
            fields[key] = "Unknown field."
        agent = _agent_named(name) if "agent" not in fields else None
        if "agent" not in fields and agent is None:
            fields["agent"] = f"No agent named {name!r}."
        if fields:
            raise BadRequest("The run cannot start.", fields)
    except BadRequest as e:
        return _bad(e)
    try:
        with admission.admitted(agent):
            thread = starting.start_thread(agent, message, request.user)
    except ratelimits.Limited as e:
        return ratelimits.too_many(e)
    return JsonResponse(thread_payload(thread), status=201)


# The agent a run starts, read at every start: compiled once per process (gateway.compiled).
_AGENT = Compiled(
    lambda name: AgentDefinition.objects.filter(name=name).values_list(*fields(AgentDefinition)),
    "(agent name)",
)


def _agent_named(name: str) -> AgentDefinition | None:
    return next(iter(_AGENT.instances(AgentDefinition, name)), None)


def _thread_list(request: HttpRequest) -> JsonResponse:
    """GET /api/threads: newest first, filtered by ?status= and ?waiting=, a page of ?limit=
    at a time; `next` carries a keyset cursor (created_at, id), so a page never repeats or
    skips a run that starts meanwhile."""
    q = request.GET
    rows = _visible_threads(request, Thread.objects.select_related("agent"))
    try:
        status = q.get("status")
        if status:
            if status not in Thread.Status.values:
                raise BadRequest(
                    "Unknown status.", {"status": f"One of {', '.join(Thread.Status.values)}."}
                )
            rows = rows.filter(status=status)
        waiting = q.get("waiting")
        if waiting not in (None, "", "0", "false", "1", "true"):
            raise BadRequest("Bad waiting.", {"waiting": "1 or true (or 0 or false)."})
        if waiting in ("1", "true"):
            # What waits for a person: a reply, or a decision (also one inside an agent
            # instance while the thread runs on); A2A's input-required tasks are these.
            rows = rows.filter(waiting_for_person()).distinct()
        page, next_url = _keyset_page(request, rows, newest_first=True)
    except BadRequest as e:
        return _bad(e)
    results = [
        {
            "id": str(t.id),
            "agent": t.agent.name,
            "status": t.status,
            "title": t.title,
            "created_at": t.created_at.isoformat(),
            "input_prompt": t.input_prompt or None,
            "input_expires_at": t.input_expires_at.isoformat() if t.input_expires_at else None,
        }
        for t in page
    ]
    return JsonResponse({"results": results, "next": next_url})


@operation("GET", "One run", responses={200: shapes.Thread})
@api(["GET"], perm="agents.view_thread", scope=(Scope.READ, Scope.RUNS))
def thread_detail(request: HttpRequest, thread_id: str) -> JsonResponse:
    thread = _thread_or_404(thread_id)
    if thread is None:
        return _not_found("thread")
    if not scopes.may_see(request.user, thread):
        return scopes.insufficient(Scope.READ, SEE_OTHERS)
    return JsonResponse(thread_payload(thread))


@operation(
    "POST",
    "Reply to a run",
    body=shapes.Message,
    responses={202: shapes.Thread},
    errors=(409,),
    description="Talk to the top of the stack; 409 unless the run waits for input.",
)
@api(["POST"], perm="agents.add_thread", scope=(Scope.RUNS, Scope.DECIDE))
def thread_messages(request: HttpRequest, thread_id: str) -> JsonResponse:
    thread = _thread_or_404(thread_id)
    if thread is None:
        return _not_found("thread")
    if not scopes.may_steer(request.user, thread):
        return scopes.insufficient(Scope.DECIDE, STEER_OTHERS)
    try:
        data = json_body(request)
        unknown = set(data) - {"text", "data"}
        if unknown:
            raise BadRequest(
                "The message has unknown fields.", {k: "Unknown field." for k in sorted(unknown)}
            )
        text, value = data.get("text"), data.get("data")
        if "data" in data:
            # application/json input: an object, checked against the agent's input rules.
            if "text" in data:
                raise BadRequest("Send text or data, not both.", {"data": "Send one of them."})
            kind = replies.JSON
        else:
            kind = replies.TEXT
            if not isinstance(text, str) or not text.strip():
                raise BadRequest("The message is empty.", {"text": "Write a message."})
            if too_long := text_too_long(text, settings.MAX_MESSAGE_CHARS):
                raise BadRequest("The message is too long.", {"text": too_long})
    except BadRequest as e:
        return _bad(e)
    try:
        thread = replies.provide_input(
            thread.pk, request.user, text=text, data=value, content_type=kind
        )
    except replies.BadInput as e:
        return _bad(BadRequest(str(e), {e.field: str(e)}))
    except replies.NotWaiting as e:
        return error(
            409,
            "not_waiting_for_input",
            f"The thread is {e.args[0]}, not waiting for input.",
            status=str(e.args[0]),
        )
    return JsonResponse(thread_payload(thread), status=202)


@operation(
    "POST",
    "Cancel a run",
    responses={200: shapes.Thread},
    errors=(409,),
    description="Unwind the stack and cancel its pending suspensions; 409 once it has ended.",
)
@api(["POST"], perm="agents.change_thread", scope=(Scope.RUNS, Scope.DECIDE))
def thread_cancel(request: HttpRequest, thread_id: str) -> JsonResponse:
    thread = _thread_or_404(thread_id)
    if thread is None:
        return _not_found("thread")
    if not scopes.may_steer(request.user, thread):
        return scopes.insufficient(Scope.DECIDE, STEER_OTHERS)
    try:
        thread = cancelling.cancel_thread(thread.pk, request.user)
    except cancelling.AlreadyFinished as e:
        return error(
            409,
            "already_finished",
            f"The thread has already ended ({e.args[0]}).",
            status=str(e.args[0]),
        )
    return JsonResponse(thread_payload(Thread.objects.get(pk=thread.pk)))


def _encode_cursor(s: Any) -> str:
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


def _keyset_page(
    request: HttpRequest, rows: Any, newest_first: bool
) -> tuple[list[Any], str | None]:
    """One page of `rows` in (created_at, id) order, newest or oldest first: those after the
    request's ?cursor=, at most ?limit= of them, and the `next` link (None on the last page).
    A keyset, not an offset, so a page never repeats or skips a row made meanwhile. Raises
    BadRequest for a bad limit or cursor."""
    limit = _limit(request)
    beyond = "lt" if newest_first else "gt"
    if request.GET.get("cursor"):
        created, pk = _decode_cursor(request.GET["cursor"])
        rows = rows.filter(
            Q(**{f"created_at__{beyond}": created}) | Q(created_at=created, **{f"id__{beyond}": pk})
        )
    order = ("-created_at", "-id") if newest_first else ("created_at", "id")
    page = list(rows.order_by(*order)[: limit + 1])
    if len(page) <= limit:
        return page, None
    page = page[:limit]
    params = request.GET.copy()
    params["cursor"] = _encode_cursor(page[-1])
    return page, f"{request.path}?{params.urlencode()}"


def _limit(request: HttpRequest) -> int:
    limit = whole_number(request.GET.get("limit", str(PAGE_SIZE)))
    if limit is None or not 1 <= limit <= MAX_PAGE_SIZE:
        raise BadRequest("Bad limit.", {"limit": f"A whole number from 1 to {MAX_PAGE_SIZE}."})
    return limit


# A decider sees what waits for a decision; a runs-only token, its own runs' suspensions.
SEE_SUSPENSIONS = (Scope.READ, Scope.DECIDE, Scope.RUNS)


def _sees_every_suspension(user: Any) -> bool:
    return scopes.has(user, Scope.READ) or scopes.has(user, Scope.DECIDE)


@operation(
    "GET", "List suspensions", query=shapes.SuspensionQuery, responses={200: shapes.SuspensionPage}
)
@api(["GET"], perm="agents.view_suspension", scope=SEE_SUSPENSIONS)
def suspensions(request: HttpRequest) -> JsonResponse:
    """Oldest first, a page at a time; `next` carries a keyset cursor."""
    q = request.GET
    rows = Suspension.objects.all()
    if not _sees_every_suspension(request.user):
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
        page, next_url = _keyset_page(request, rows, newest_first=False)
    except BadRequest as e:
        return _bad(e)
    viewer = policy.Viewer.of(request.user)
    return JsonResponse({"results": [_for_viewer(s, viewer) for s in page], "next": next_url})


# Compiled once per process (gateway.compiled): the decision POST reads it every time.
_SUSPENSION = Compiled(
    lambda pk: Suspension.objects.filter(pk=pk).values_list(*fields(Suspension)).order_by()[:1],
    uuid.UUID(int=1),
)
_SUSPENSION_OF_THREAD = Compiled(
    lambda pk, thread: (
        Suspension.objects.filter(pk=pk, thread_id=thread)
        .values_list(*fields(Suspension))
        .order_by()[:1]
    ),
    uuid.UUID(int=1),
    uuid.UUID(int=2),
)


def _suspension_or_none(
    suspension_id: str, thread_id: uuid.UUID | None = None
) -> Suspension | None:
    pk = parse_uuid(suspension_id)
    if pk is None:
        return None
    if thread_id is None:
        found = _SUSPENSION.instances(Suspension, pk)
    else:
        found = _SUSPENSION_OF_THREAD.instances(Suspension, pk, thread_id)
    return found[0] if found else None


@operation("GET", "One suspension", responses={200: shapes.SuspensionWithViewer})
@api(["GET"], perm="agents.view_suspension", scope=SEE_SUSPENSIONS)
def suspension_detail(request: HttpRequest, suspension_id: str) -> JsonResponse:
    s = _suspension_or_none(suspension_id)
    if s is None:
        return _not_found("suspension")
    if not _sees_every_suspension(request.user) and not scopes.owns(request.user, s.thread):
        return scopes.insufficient(Scope.READ, SEE_OTHERS)
    return JsonResponse(_for_viewer(s, policy.Viewer.of(request.user)))


def _for_viewer(s: Suspension, viewer: policy.Viewer) -> dict[str, Any]:
    """The suspension, and whether the caller may decide it and if not why (agents.policy)."""
    return {**_with_version(s), "you": policy.viewer_payload(s, viewer)}


def _with_version(s: Suspension) -> dict[str, Any]:
    """The suspension with how its agent and tool now compare with when it was made."""
    return {**suspension_payload(s), "version": versions.version_payload(s)}


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
        # Dismiss from the inbox without deciding (agents.actions.ignore).
        unknown = set(data) - {"ignore"}
        if unknown:
            raise BadRequest("Unknown fields.", {k: "Unknown field." for k in unknown})
        if data["ignore"] is not True:
            raise BadRequest("Send ignore: true, alone.", {"ignore": "Send true."})
        return {"ignore": True}
    if "response" in data:
        # The answer to a question, or a reviewer's response to a confirmation whose policy
        # allows it (agents.policy allow_respond, checked by agents.actions.decide).
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
    s = _suspension_or_none(suspension_id, thread_pk) if thread_pk else None
    if s is None:
        return _not_found("suspension in this thread")
    try:
        data = json_body(request)
        if not s.pending:
            # A repeat of the recorded decision is answered with it; anything else conflicts.
            decision = parse_decision(s, data)
            return _outcome(s, 200 if decisions.same_decision(s, decision) else 409)
        decision = parse_decision(s, data)
        versions.check(s, decision)
    except BadRequest as e:
        return _bad(e)
    except versions.Unbound as e:
        return JsonResponse(
            {"error": e.code, "detail": e.detail, "suspension": _with_version(s)}, status=409
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


@operation(
    "GET",
    "The event log",
    query=shapes.EventQuery,
    responses={200: shapes.EventPage},
    description="The audit trail in id order, after `after`; page on with `last_id`.",
)
@api(["GET"], perm="agents.view_thread", scope=(Scope.READ, Scope.RUNS))
def event_list(request: HttpRequest) -> JsonResponse:
    q = request.GET
    after = row_id(q.get("after", "0"))
    if after is None:
        return error(400, "invalid", "Bad cursor.", {"after": "An event id (a whole number)."})
    try:
        limit = _limit(request) if "limit" in q else MAX_PAGE_SIZE
    except BadRequest as e:
        return _bad(e)
    rows = _visible_threads(request, Event.objects.filter(id__gt=after), "thread__created_by")
    rows = rows.order_by("id")
    if q.get("thread"):
        pk = parse_uuid(q["thread"])
        if pk is None:
            return error(400, "invalid", "Bad thread id.", {"thread": "A thread id (UUID)."})
        rows = rows.filter(thread_id=pk)
    page = list(rows[:limit])
    return JsonResponse(
        {
            "events": [e.as_message() for e in page],
            "last_id": page[-1].id if page else after,
        }
    )
