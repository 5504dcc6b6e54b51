"""Threads and their events as A2A objects. A task is a thread; its id is also its contextId.

A task's state comes from the thread's status and its pending suspensions:

    running, suspended   → working; input-required while a suspension is pending (an approval
                           or an ask_user question, in the thread or in one of its agent
                           instances)
    cancelling           → working (a cancel waits for a running tool's result; its
                           suspensions are cancelled already)
    waiting_input        → input-required
    completed            → completed (the answer is the task's artifact)
    failed               → failed
    cancelled            → canceled

No task is ever `rejected`: a rejected approval does not end a thread here. The agent reads
the rejection as its tool's result and goes on (most often to say it did nothing), so the task
ends completed with that answer, or failed if the agent fails.

`Fold` derives the same states from the Event table, one event at a time: a stream sends the
updates it makes, and after the same events it must agree with the snapshot of the rows
(a2a_server.service.snapshot; tests/a2a/test_a2a_fold.py holds them to that).
"""

import json
import uuid
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from a2a.types import (
    Artifact,
    Message,
    Part,
    Role,
    Task,
    TaskArtifactUpdateEvent,
    TaskState,
    TaskStatus,
    TaskStatusUpdateEvent,
)
from google.protobuf import json_format

from agents.models import Event, Thread
from approvals import excerpt

WORKING = TaskState.TASK_STATE_WORKING
INPUT_REQUIRED = TaskState.TASK_STATE_INPUT_REQUIRED
COMPLETED = TaskState.TASK_STATE_COMPLETED
FAILED = TaskState.TASK_STATE_FAILED
CANCELED = TaskState.TASK_STATE_CANCELED
TERMINAL = frozenset({COMPLETED, FAILED, CANCELED, TaskState.TASK_STATE_REJECTED})
# The task waits for someone: a stream of updates ends there, as it does at the end.
INTERRUPTED = frozenset({INPUT_REQUIRED, TaskState.TASK_STATE_AUTH_REQUIRED})

ENDED = {
    Thread.Status.COMPLETED: COMPLETED,
    Thread.Status.FAILED: FAILED,
    Thread.Status.CANCELLED: CANCELED,
}
RESULT = "result"  # the artifact id of a completed task's answer
TEXT, JSON = "text/plain", "application/json"
# Names status messages by their content, so the same wait has the same message id each time.
MESSAGES = uuid.UUID("5b0c2d8e-7a51-4f0e-9d0a-a2a5a2a5a2a5")

# The events a task's history is made of, in order: what people said and what agents said.
HISTORY_TYPES = (
    Event.Type.THREAD_STARTED,
    Event.Type.USER_MESSAGE,
    Event.Type.AGENT_MESSAGE,
    Event.Type.SUSPENSION_DECIDED,
)


def task_state(status: str, pending: bool) -> int:
    """The A2A state of a thread with `status`; `pending`: it has a pending suspension."""
    if status in ENDED:
        return ENDED[status]
    if status == Thread.Status.WAITING_INPUT or pending:
        return INPUT_REQUIRED
    return WORKING


def text_part(text: str) -> Part:
    return Part(text=text, media_type=TEXT)


def data_part(value: Any) -> Part:
    part = Part(media_type=JSON)
    json_format.ParseDict(value, part.data)
    return part


def message(
    task_id: str, role: int, parts: list[Part], message_id: str, metadata: dict | None = None
) -> Message:
    m = Message(message_id=message_id, context_id=task_id, task_id=task_id, role=role)
    m.parts.extend(parts)
    if metadata:
        m.metadata.update(metadata)
    return m


def suspension_entry(p: dict[str, Any]) -> dict[str, Any]:
    """A pending suspension as a task's status lists it (`p`: agents.payloads.suspension_payload,
    as the rows give it and as AGENT_SUSPENDED carries it)."""
    entry = {
        "suspension": p["id"],
        "kind": p["kind"],
        "agent": p["agent"],
        "tool": p["tool"],
        "arguments": p.get("input") or {},
        "prompt": p.get("prompt") or "",
        "expiresAt": p.get("expires_at"),
        "onTimeout": p.get("on_timeout"),
    }
    if p["kind"] == "input":
        entry["question"] = question(p)
    return entry


def question(p: dict[str, Any]) -> str:
    """What an ask_user call asks: its `question` argument, else the text before the call."""
    asked = (p.get("input") or {}).get("question")
    if isinstance(asked, str) and asked.strip():
        return asked
    return p.get("prompt") or f"{p['agent']} asks a question."


def awaited(prompt: dict[str, Any] | None, pending: list[dict[str, Any]]) -> dict[str, Any]:
    """What an input-required task waits for, as data: the agent's question and the input it
    accepts (`prompt`: an INPUT_REQUIRED payload), and each pending suspension."""
    data: dict[str, Any] = {}
    if prompt is not None:
        data["input"] = {
            "prompt": prompt.get("prompt", ""),
            "types": prompt.get("input_types") or [TEXT],
            "maxChars": prompt.get("max_chars"),
            "expiresAt": prompt.get("expires_at"),
            "onTimeout": prompt.get("on_timeout"),
        }
    if pending:
        # Oldest first, as the inbox shows them; the rows and the events give the same order.
        ordered = sorted(pending, key=lambda p: (p.get("created_at") or "", p["id"]))
        data["suspensions"] = [suspension_entry(p) for p in ordered]
    return data


def status_line(text: str, whole: str = "") -> str:
    """Untrusted text in a status message's words, cut at the display limit (approvals.excerpt);
    the data part carries it whole, and so does `whole`, its API path, when there is one."""
    part = excerpt.cut(text)
    if not part.cut:
        return text
    return f"{part.text} {part.note} (whole in the data part{f' and at {whole}' if whole else ''})"


def awaited_message(task_id: str, data: dict[str, Any]) -> Message:
    """The status message of an input-required task: the question or what needs approval, in
    words (a text part), and all of it as data (a data part)."""
    lines = []
    if "input" in data:
        lines.append(status_line(data["input"]["prompt"]))
    kinds = set()
    for s in data.get("suspensions", []):
        kinds.add(s["kind"])
        if s["kind"] == "input":
            lines.append(status_line(s["question"], excerpt.suspension_url(s["suspension"])))
        else:
            lines.append(f"{s['agent']} waits for approval to call {s['tool']}.")
    if "confirmation" in kinds:
        waits = "approval"
    elif "input" in data:
        waits = "input"
    else:
        waits = "answer"
    message_id = str(uuid.uuid5(MESSAGES, f"{task_id}:{json.dumps(data, sort_keys=True)}"))
    return message(
        task_id,
        Role.ROLE_AGENT,
        [text_part("\n".join(lines)), data_part(data)],
        message_id,
        {"awaiting": waits},
    )


def failure_message(task_id: str, error: str) -> Message:
    message_id = str(uuid.uuid5(MESSAGES, f"{task_id}:failed:{error}"))
    return message(task_id, Role.ROLE_AGENT, [text_part(error)], message_id)


def history_message(task_id: str, event: Event) -> Message | None:
    """One message of a task's history (HISTORY_TYPES), None for an event that is not one."""
    p = event.payload
    message_id = f"event-{event.id}"
    author = {"author": event.actor_name} if event.actor_name else {}
    if event.type == Event.Type.THREAD_STARTED:
        text = p.get("message", "")
        return message(task_id, Role.ROLE_USER, [text_part(text)], message_id, author)
    if event.type == Event.Type.USER_MESSAGE:
        where = {"frame": p.get("frame", ""), **author}
        return message(task_id, Role.ROLE_USER, [text_part(p.get("text", ""))], message_id, where)
    if event.type == Event.Type.AGENT_MESSAGE:
        where = {"frame": p.get("frame", "")}
        return message(task_id, Role.ROLE_AGENT, [text_part(p.get("text", ""))], message_id, where)
    if event.type == Event.Type.SUSPENSION_DECIDED:
        about = {"suspension": str(event.suspension_id), **author}
        if p.get("receipt"):
            # The decision's signed receipt (agents.receipts), to check before acting on it.
            about["receipt"] = p["receipt"]
        if p.get("response") is not None:
            return message(task_id, Role.ROLE_USER, [text_part(p["response"])], message_id, about)
        decision = {
            "suspension": str(event.suspension_id),
            "approved": p.get("approved"),
            "reason": p.get("reason") or "",
            "modifiedArgs": p.get("modifiedArgs"),
            "receipt": p.get("receipt"),
        }
        return message(
            task_id, Role.ROLE_USER, [data_part({"decision": decision})], message_id, about
        )
    return None


def result_artifact(text: str) -> Artifact:
    artifact = Artifact(artifact_id=RESULT, name="result", description="The agent's answer")
    artifact.parts.append(text_part(text))
    return artifact


def status(state: int, msg: Message | None, at: datetime) -> TaskStatus:
    s = TaskStatus(state=state)
    if msg is not None:
        s.message.CopyFrom(msg)
    s.timestamp.FromDatetime(at)
    return s


@dataclass
class Fold:
    """A task's state rebuilt from its events, in id order, and the updates a stream sends.

    `apply` takes the next event and returns the updates it makes (none, a status update, or
    the answer's artifact and the final status). A status update is sent when the state or
    what the task awaits changes, and for each message of an agent. While the task waits, its
    last status update says what it waits for, in the words and data GetTask gives
    (build_task).
    """

    task_id: str
    pending: dict[str, dict[str, Any]] = field(default_factory=dict)
    prompt: dict[str, Any] | None = None
    ended: int | None = None
    shown: tuple[int, str] | None = None

    @property
    def state(self) -> int:
        if self.ended is not None:
            return self.ended
        return INPUT_REQUIRED if self.prompt is not None or self.pending else WORKING

    def awaited(self) -> dict[str, Any]:
        return awaited(self.prompt, list(self.pending.values()))

    def apply(self, event: Event) -> list[TaskStatusUpdateEvent | TaskArtifactUpdateEvent]:
        t, p = event.type, event.payload
        sid = str(event.suspension_id) if event.suspension_id else ""
        said: Message | None = None
        updates: list[TaskStatusUpdateEvent | TaskArtifactUpdateEvent] = []
        if t == Event.Type.AGENT_SUSPENDED:
            self.pending[sid] = p
        elif t in (Event.Type.SUSPENSION_DECIDED, Event.Type.SUSPENSION_TIMEOUT):
            self.pending.pop(sid, None)
        elif t == Event.Type.SUSPENSION_CANCELLED:
            # Only a cancelled run cancels suspensions, and its THREAD_CANCELLED follows.
            self.pending.pop(sid, None)
            return []
        elif t == Event.Type.SUSPENSION_EXTENDED and sid in self.pending:
            self.pending[sid] = {**self.pending[sid], "expires_at": p.get("expires_at")}
        elif t == Event.Type.INPUT_REQUIRED:
            self.prompt = p
        elif t in (Event.Type.INPUT_PROVIDED, Event.Type.INPUT_TIMEOUT):
            self.prompt = None
            if t == Event.Type.INPUT_TIMEOUT and p.get("on_timeout") != "continue":
                return []  # the run is cancelled next, in the same transaction
        elif t == Event.Type.AGENT_MESSAGE:
            said = history_message(self.task_id, event)
        elif t == Event.Type.THREAD_COMPLETED:
            self.ended = COMPLETED
            updates.append(
                TaskArtifactUpdateEvent(
                    task_id=self.task_id,
                    context_id=self.task_id,
                    artifact=result_artifact(p.get("result", "")),
                    last_chunk=True,
                )
            )
        elif t == Event.Type.THREAD_FAILED:
            self.ended = FAILED
            said = failure_message(self.task_id, p.get("error", ""))
        elif t == Event.Type.THREAD_CANCELLED:
            self.ended = CANCELED
        elif t != Event.Type.THREAD_STARTED:
            return []
        data = self.awaited() if self.state == INPUT_REQUIRED else {}
        shown = (self.state, json.dumps(data, sort_keys=True))
        if said is None and shown == self.shown:
            return updates
        self.shown = shown
        if said is not None and data:
            # An agent instance spoke while the task waits: its words, then again what the task
            # waits for, so that the latest status always says it (as GetTask does).
            updates.append(self._update(said, event))
            said = None
        if said is None and data:
            said = awaited_message(self.task_id, data)
        updates.append(self._update(said, event))
        return updates

    def _update(self, said: Message | None, event: Event) -> TaskStatusUpdateEvent:
        return TaskStatusUpdateEvent(
            task_id=self.task_id,
            context_id=self.task_id,
            status=status(self.state, said, event.created_at),
        )


def build_task(
    thread: Thread,
    pending: list[dict[str, Any]],
    prompt: dict[str, Any] | None,
    history: list[Event],
    cursor: int | None,
    artifacts: bool = True,
) -> Task:
    """The task of a thread as its rows say now: `pending` its pending suspensions (as
    suspension_payload), `prompt` the INPUT_REQUIRED payload of its wait for input, if it
    waits, `history` the events of its history to show, `cursor` the id of the last of its
    events the rows reflect."""
    task_id = str(thread.pk)
    state = task_state(thread.status, bool(pending))
    said = None
    if state == INPUT_REQUIRED:
        waiting = prompt if thread.status == Thread.Status.WAITING_INPUT else None
        if waiting is None and thread.status == Thread.Status.WAITING_INPUT:
            waiting = {"prompt": thread.input_prompt}
        said = awaited_message(task_id, awaited(waiting, pending))
    elif state == FAILED:
        said = failure_message(task_id, thread.error)
    task = Task(id=task_id, context_id=task_id, status=status(state, said, thread.updated_at))
    for event in history:
        m = history_message(task_id, event)
        if m is not None:
            task.history.append(m)
    if artifacts and state == COMPLETED:
        task.artifacts.append(result_artifact(thread.result))
    task.metadata.update(
        {
            "agent": thread.agent.name,
            "title": thread.title,
            "createdBy": thread.created_by_name,
            "createdAt": thread.created_at.isoformat(),
        }
    )
    if cursor is not None:
        task.metadata["eventId"] = str(cursor)
    return task
