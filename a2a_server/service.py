"""What the A2A methods change: SendMessage (a new task, a reply, an answer, a decision) and
CancelTask, on the gateway's own rows.

Blocking code (the ORM): a2a_server.handler calls it from worker threads. Every change goes
through the engine's actions (agents.starting, agents.replies, agents.door) with the
checks and limits of the REST API (approvals.api): a run is
started as POST /api/threads starts one, a reply goes to an agent that waits for input as
POST /api/threads/{id}/messages sends it, a decision is checked by
approvals.api.decisions.parse_decision, taken by the one door for decisions (agents.door.take,
a grant with it) and answered like resumeExecution (the same decision again is fine; a
different one learns the recorded outcome), and a cancel is POST /api/threads/{id}/cancel.
"""

import json
from dataclasses import dataclass
from typing import Any, assert_never

from a2a.types import (
    ContentTypeNotSupportedError,
    InvalidParamsError,
    Message,
    Role,
    SendMessageRequest,
    Task,
    TaskNotCancelableError,
    TaskState,
    UnsupportedOperationError,
)
from django.conf import settings
from google.protobuf import json_format

from a2a_server import mapping, push
from a2a_server.access import (
    CANCEL,
    DECIDE,
    START,
    Denied,
    find_thread,
    invalid,
    plain,
    require,
    require_scope,
    steer,
)
from a2a_server.reads import pending, snapshot
from access import admission, ratelimits
from access.models import Scope
from agents import cancelling, door, replies, starting
from agents.models import AgentDefinition, Suspension, Thread
from approvals.api.decisions import parse_decision
from approvals.http import BadRequest, parse_uuid, text_too_long


@dataclass
class Parts:
    texts: list[tuple[int, str]]
    data: list[tuple[int, Any]]

    def text(self) -> str:
        return "\n\n".join(t for _, t in self.texts)


def _parts(message: Message) -> Parts:
    parts = Parts([], [])
    for i, part in enumerate(message.parts):
        kind = part.WhichOneof("content")
        if kind == "text":
            parts.texts.append((i, part.text))
        elif kind == "data":
            parts.data.append((i, plain(json_format.MessageToDict(part.data))))
        elif kind is None:
            raise invalid("A part needs text or data.", f"message.parts[{i}]")
        else:
            raise ContentTypeNotSupportedError(
                f"File parts are not accepted ({part.media_type or kind}): send text or data parts."
            )
    return parts


def _metadata(*structs: Any) -> dict[str, Any]:
    found: dict[str, Any] = {}
    for struct in structs:
        found.update(plain(json_format.MessageToDict(struct)))
    return found


def send(user: Any, request: SendMessageRequest) -> str:
    """SendMessage: start a task, or continue one (message.taskId). Returns the task's id."""
    if not request.HasField("message"):
        raise invalid("Send a message.", "message")
    msg = request.message
    if msg.role == Role.ROLE_AGENT:
        raise invalid("A message to the gateway comes from its user (ROLE_USER).", "message.role")
    if not msg.parts:
        raise invalid("At least one part is required.", "message.parts")
    parts = _parts(msg)
    if msg.task_id:
        thread = find_thread(msg.task_id)
        if msg.context_id and msg.context_id != msg.task_id:
            raise invalid("A task's contextId is its own id.", "message.contextId")
        _continue(user, thread, msg, parts)
        return str(thread.pk)
    if msg.context_id:
        raise invalid(
            "Each task is a context of its own here: send taskId to continue a task, or leave "
            "contextId out to start one.",
            "message.contextId",
        )
    return _start(user, request, parts)


def default_agent() -> AgentDefinition | None:
    """The card's first skill: the agent a message that names none goes to."""
    return AgentDefinition.objects.order_by("name").first()


def _start(user: Any, request: SendMessageRequest, parts: Parts) -> str:
    require(user, START, "start tasks")
    require_scope(user, Scope.RUNS, "start tasks")
    ratelimits.hit(ratelimits.RUNS, user)  # Limited: HTTP 429 (a2a_server.rpc)
    if any(_is_decision(v) for _, v in parts.data):
        raise invalid("A new task has no suspension to decide.", "message.parts")
    name = _metadata(request.message.metadata, request.metadata).get("agent")
    if name is not None and not isinstance(name, str):
        raise invalid("The name of an agent (a skill id of the card).", "metadata.agent")
    agent = AgentDefinition.objects.filter(name=name).first() if name else default_agent()
    if agent is None:
        known = ", ".join(AgentDefinition.objects.order_by("name").values_list("name", flat=True))
        raise invalid(
            f"No agent named {name[:100]!r}; the card's skills are: {known}."
            if name
            else "No agent is loaded.",
            "metadata.agent",
        )
    chunks = [t for _, t in parts.texts]
    chunks += [json.dumps(v, ensure_ascii=False) for _, v in parts.data]
    text = "\n\n".join(chunks)
    if not text.strip():
        raise invalid("Write the first message.", "message.parts")
    if too_long := text_too_long(text, settings.MAX_MESSAGE_CHARS):
        raise invalid(too_long, "message.parts")
    config = request.configuration
    fields = None
    if config.HasField("task_push_notification_config"):
        where = "configuration.taskPushNotificationConfig"
        fields = push.checked(config.task_push_notification_config, where)
    with admission.admitted(agent):  # the pending cap: Limited, as over REST
        thread = starting.start_thread(agent, text, user)
        if fields is not None:
            push.store(user, thread, fields)
    return str(thread.pk)


def _is_decision(value: Any) -> bool:
    return isinstance(value, dict) and "decision" in value


def _continue(user: Any, thread: Thread, msg: Message, parts: Parts) -> None:
    decisions = [(i, v["decision"]) for i, v in parts.data if _is_decision(v)]
    if decisions:
        if len(decisions) != len(msg.parts):
            raise invalid(
                'Send decisions on their own: one data part {"decision": ...} each.',
                "message.parts",
            )
        # Before the check that the task goes on: as over REST, repeating the recorded
        # decision is fine even once the task has ended, and a different one learns it.
        _decisions(user, thread, decisions)
        return
    if thread.finished:
        name = TaskState.Name(mapping.ENDED[thread.status])
        raise UnsupportedOperationError(f"The task has ended ({name}); it takes no more messages.")
    if thread.status == Thread.Status.WAITING_INPUT:
        _reply(user, thread, parts)
        return
    questions = list(pending(thread).filter(kind=Suspension.Kind.INPUT))
    if questions:
        s = _question(msg, questions)
        if parts.data:
            raise ContentTypeNotSupportedError(
                f"{s.tool_name} takes its answer as text: send a text part."
            )
        _decisions(user, thread, [(0, {"suspension": str(s.pk), "response": parts.text()})])
        return
    if pending(thread).exists():
        raise UnsupportedOperationError(
            "The task waits for approval, not for a message: decide each suspension its status "
            'lists with a data part {"decision": {"suspension": ..., "approved": ...}}.'
        )
    raise UnsupportedOperationError(
        "The task is working: it takes a message only while it waits for input."
    )


def _reply(user: Any, thread: Thread, parts: Parts) -> None:
    """A reply to an agent that waits for input (POST /api/threads/{id}/messages)."""
    require(user, START, "reply to agents")
    steer(user, thread, "reply to agents")
    if parts.data and parts.texts or len(parts.data) > 1:
        raise invalid("Reply with text parts, or with one data part.", "message.parts")
    try:
        if parts.data:
            replies.provide_input(thread.pk, user, data=parts.data[0][1], content_type=mapping.JSON)
        else:
            replies.provide_input(thread.pk, user, text=parts.text(), content_type=mapping.TEXT)
    except replies.BadInput as e:
        if e.field == "type":
            raise ContentTypeNotSupportedError(str(e)) from e
        raise invalid(str(e), "message.parts") from e
    except replies.NotWaiting as e:
        raise UnsupportedOperationError(
            f"The task is no longer waiting for input ({e.args[0]})."
        ) from e


def _question(msg: Message, questions: list[Suspension]) -> Suspension:
    named = _metadata(msg.metadata).get("suspension")
    if named is not None:
        for s in questions:
            if str(s.pk) == named:
                return s
        raise invalid(
            "No pending question with that id in this task.", "message.metadata.suspension"
        )
    if len(questions) > 1:
        ids = ", ".join(str(s.pk) for s in questions)
        raise invalid(
            f"Several questions wait: name the one answered ({ids}).", "message.metadata.suspension"
        )
    return questions[0]


def _decisions(user: Any, thread: Thread, decisions: list[tuple[int, Any]]) -> None:
    """Decisions, as resumeExecution takes them: each is checked as its body is
    (approvals.api.decisions.parse_decision) and screened by the door (agents.door.refusal:
    the version binding, the policy, a grant's bar) before any is taken; then each is taken by
    the door (agents.door.take), with its grant if it carries one (the caller may decide, with
    the decide scope: what POST .../resume asks of a grant). A repeat of the recorded decision
    is fine; a different one is refused with the recorded outcome."""
    require(user, DECIDE, "decide suspensions")
    require_scope(user, Scope.DECIDE, "decide suspensions")
    ratelimits.hit(ratelimits.DECISIONS, user)
    checked: list[tuple[Suspension, door.Decision]] = []
    for i, d in decisions:
        where = f"message.parts[{i}].data.decision"
        if not isinstance(d, dict):
            raise invalid(
                "A decision is an object: suspension, approved, reason, modifiedArgs, grant "
                "(or suspension and response, to answer; or suspension and ignore: true).",
                where,
            )
        pk = parse_uuid(d["suspension"]) if isinstance(d.get("suspension"), str) else None
        s = Suspension.objects.filter(pk=pk, thread=thread).first() if pk else None
        if s is None:
            raise invalid("No suspension with that id in this task.", f"{where}.suspension")
        try:
            decision = parse_decision(s, {k: v for k, v in d.items() if k != "suspension"})
        except BadRequest as e:
            fields = e.fields or {"": e.detail}
            raise InvalidParamsError(
                e.detail,
                data={
                    "errors": [
                        {"field": f"{where}.{k}" if k else where, "message": v}
                        for k, v in fields.items()
                    ]
                },
            ) from e
        refused = door.refusal(s, user, decision)
        if refused is not None:
            raise _said(refused)
        checked.append((s, decision))
    for s, decision in checked:
        outcome = door.take(s, user, decision)
        if not isinstance(outcome, door.Decided | door.Voted | door.Repeat):
            # An ignore leaves the task waiting; a vote too, until the quorum's last one.
            raise _said(outcome)


def _said(outcome: door.Conflict | door.Refused | door.Unbound) -> Exception:
    """A decision the door did not take, in A2A's words: refused by the policy, HTTP 403
    PERMISSION_DENIED with the rule in its metadata; a decision on another view, or after
    another one, -32004 with what to know in `data`."""
    match outcome:
        case door.Refused(rule=rule, detail=detail):
            return Denied(403, detail, rule=rule)
        case door.Unbound(suspension=s, code=code, detail=detail):
            return UnsupportedOperationError(detail, data={"suspension": str(s.pk), "error": code})
        case door.Conflict():
            return conflict(outcome)
    assert_never(outcome)


def conflict(late: door.Conflict) -> UnsupportedOperationError:
    """A decision that came after another: the recorded outcome, in words and as data (the
    REST API's 409)."""
    s = late.suspension
    outcome = s.outcome()
    return UnsupportedOperationError(
        late.detail,
        data={
            "suspension": str(s.pk),
            "status": s.status,
            "approved": json.dumps(outcome["approved"]),
            "reason": outcome["reason"] or "",
            "response": outcome["response"] or "",
            "modifiedArgs": json.dumps(outcome["modifiedArgs"]),
            "decidedBy": outcome["decided_by"] or "",
            "decidedAt": outcome["decided_at"] or "",
        },
    )


def cancel(user: Any, task_id: str) -> Task:
    require(user, CANCEL, "cancel tasks")
    thread = find_thread(task_id)
    steer(user, thread, "cancel tasks")
    try:
        cancelling.cancel_thread(thread.pk, user)
    except cancelling.AlreadyFinished as e:
        name = TaskState.Name(mapping.ENDED[e.args[0]])
        raise TaskNotCancelableError(f"The task has already ended ({name}).") from e
    return snapshot(task_id).task
