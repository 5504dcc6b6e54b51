"""A thread's transcript: each event as a line of the thread page, and the status it leaves."""

from typing import Any

from agents.models import Event, StackFrame, Thread
from approvals import excerpt
from approvals.cards import pretty, signed_with


def describe(type: str, payload: dict[str, Any], actor: str | None) -> dict[str, str]:
    """Who said what, for one transcript line."""
    p = payload
    if type in (Event.Type.THREAD_STARTED, Event.Type.USER_MESSAGE):
        return {
            "tone": "user",
            "who": actor or "user",
            "text": p.get("message") or p.get("text", ""),
        }
    if type == Event.Type.AGENT_MESSAGE:
        return {"tone": "agent", "who": p.get("frame", ""), "text": p.get("text", "")}
    if type == Event.Type.THREAD_WAITING:
        # Its text was shown already by the AGENT_MESSAGE of the same answer.
        return {"tone": "system", "who": p.get("frame", ""), "text": "waits for your reply"}
    if type == Event.Type.THREAD_SUSPENDED:
        return {
            "tone": "system",
            "who": "thread",
            "text": "every agent instance waits for a person",
        }
    if type == Event.Type.THREAD_RESUMED:
        return {"tone": "system", "who": "thread", "text": "an agent instance works again"}
    if type == Event.Type.TOOL_CALLED:
        return {
            "tone": "tool",
            "who": p.get("frame", ""),
            "text": f"calls {p.get('tool', '')}",
            "pre": pretty(p.get("input")),
        }
    if type == Event.Type.TOOL_RESULT:
        failed = p.get("is_error")
        return {
            "tone": "error" if failed else "result",
            "who": p.get("tool", ""),
            "text": "error" if failed else "result",
            "pre": str(p.get("content", "")),
        }
    if type == Event.Type.AGENT_SUSPENDED:
        kind = "an answer" if p.get("kind") == "input" else "a decision"
        return {
            "tone": "decision",
            "who": (p.get("presentation") or {}).get("asker") or p.get("agent", ""),
            "text": f"waits for {kind}",
        }
    if type == Event.Type.SUSPENSION_IGNORED:
        return {
            "tone": "system",
            "who": actor or p.get("by") or "",
            "text": f"dismissed {p.get('tool', '')} from the inbox; its deadline still applies",
        }
    if type == Event.Type.SUSPENSION_DECIDED:
        if p.get("status") == "responded":
            text = f"answered instead of deciding {p.get('tool', '')}: {p.get('response', '')}"
        elif p.get("response") is not None:
            text = f"answered: {p['response']}"
        else:
            text = f"{p.get('status', '')} {p.get('tool', '')}{signed_with(p.get('passkey'))}"
            if p.get("reason"):
                text += f": {p['reason']}"
        edited = p.get("modifiedArgs")
        return {
            "tone": "decision",
            # A rule of the policy (agents.policy), or a standing grant (agents.grants),
            # decides with no person as actor.
            "who": actor or p.get("decided_by") or "",
            "text": text,
            "pre": pretty(edited) if edited is not None else "",
        }
    if type == Event.Type.SUSPENSION_TIMEOUT:
        verdict = "approved" if p.get("approved") else "rejected"
        return {
            "tone": "decision",
            "who": "deadline",
            "text": f"{p.get('tool', '')} {verdict} automatically",
        }
    if type == Event.Type.SUSPENSION_CANCELLED:
        return {"tone": "decision", "who": actor or "", "text": f"{p.get('tool', '')} cancelled"}
    if type == Event.Type.AGENT_RESUMED:
        return {
            "tone": "system",
            "who": p.get("frame", ""),
            "text": f"resumed after {p.get('tool', '')}",
        }
    if type == Event.Type.FRAME_PUSHED:
        return {"tone": "system", "who": "stack", "text": f"{p.get('frame', '')} started"}
    if type == Event.Type.FRAME_POPPED:
        return {
            "tone": "system",
            "who": "stack",
            "text": f"{p.get('frame', '')} returned to {p.get('to', '')}",
            "pre": str(p.get("result") or ""),
        }
    if type == Event.Type.THREAD_COMPLETED:
        return {
            "tone": "end",
            "who": "thread",
            "text": "completed",
            "pre": str(p.get("result") or ""),
        }
    if type == Event.Type.THREAD_FAILED:
        return {
            "tone": "error",
            "who": "thread",
            "text": "failed",
            "pre": str(p.get("error") or ""),
        }
    if type == Event.Type.THREAD_CANCELLED:
        return {"tone": "end", "who": actor or "thread", "text": "cancelled the run"}
    if type == Event.Type.THREAD_CANCELLING:
        tools = ", ".join(str(t) for t in p.get("waiting_for") or [])
        return {
            "tone": "end",
            "who": actor or "thread",
            "text": f"cancelled the run: it ends once {tools} returns and its result is recorded",
        }
    if type == Event.Type.INSTANCE_STARTED:
        return {
            "tone": "system",
            "who": p.get("parent_frame", ""),
            "text": f"started {p.get('instance', '')}",
        }
    if type == Event.Type.INSTANCE_FINISHED:
        status = p.get("status", "")
        return {
            "tone": "result" if status == "done" and not p.get("is_error") else "error",
            "who": p.get("instance", ""),
            "text": f"{status} in {seconds(p.get('duration_ms'))}",
            "pre": str(p.get("result") or ""),
        }
    if type == Event.Type.INPUT_TIMEOUT:
        told = p.get("on_timeout") == "continue"
        return {
            "tone": "system",
            "who": p.get("frame") or "thread",
            "text": "no reply in time: the agent was told"
            if told
            else "no reply in time: the run is cancelled",
        }
    if type == Event.Type.SUSPENSION_REMINDER:
        return {
            "tone": "system",
            "who": p.get("agent", ""),
            "text": f"reminder: {p.get('tool', '')}",
        }
    if type == Event.Type.SUSPENSION_ESCALATED:
        return {
            "tone": "system",
            "who": p.get("agent", ""),
            "text": f"escalated {p.get('tool', '')} to {p.get('escalate_to', '')}",
        }
    if type == Event.Type.SUSPENSION_VOTED:
        return {
            "tone": "decision",
            "who": actor or p.get("by") or "",
            "text": f"approved {p.get('tool', '')}{signed_with(p.get('passkey'))} "
            f"({p.get('approvals')} of {p.get('required')} approvals)",
            "pre": pretty(p["edited_args"]) if p.get("edited_args") is not None else "",
        }
    if type in (Event.Type.GRANT_CREATED, Event.Type.GRANT_USED):
        made = type == Event.Type.GRANT_CREATED
        return {
            "tone": "system",
            "who": actor or p.get("granted_by") or "",
            "text": (f"granted {p.get('tool', '')} when {p.get('conditions_text', '')}")
            if made
            else f"grant used: {p.get('uses')} of {p.get('max_uses')}",
        }
    if type == Event.Type.SUSPENSION_REVIEWED:
        # A reviewing model's answer (agents.reviewing): labelled as the model's, its reason
        # shown as text like every model's words.
        outcome = p.get("outcome", "")
        verb = (
            "could not review" if outcome == "failed" else f"{outcome}: {p.get('recommendation')}"
        )
        return {
            "tone": "system",
            "who": f"reviewing model {p.get('model', '')}",
            "text": f"{verb} {p.get('tool', '')}",
            "pre": str(p.get("error") if outcome == "failed" else p.get("reason") or ""),
        }
    if type == Event.Type.SUSPENSION_EXTENDED:
        return {
            "tone": "system",
            "who": actor or p.get("by") or "",
            "text": f"extended the deadline of {p.get('tool', '')}",
            "pre": str(p.get("reason") or ""),
        }
    return {"tone": "system", "who": "", "text": type}


# Said already by the line of another event (THREAD_WAITING, USER_MESSAGE): not shown again.
HIDDEN = {Event.Type.INPUT_REQUIRED, Event.Type.INPUT_PROVIDED}


def seconds(ms: Any) -> str:
    """A duration in milliseconds as the pages write it."""
    if not isinstance(ms, int | float):
        return "?"
    return f"{ms / 1000:.1f} s"


# An instance's own chat: shown folded under its INSTANCE_STARTED line (the page moves the lines
# marked data-lane there); its suspensions and their decisions stay in the transcript, where a
# reviewer answers them.
FOLDED = {
    Event.Type.AGENT_MESSAGE,
    Event.Type.TOOL_CALLED,
    Event.Type.TOOL_RESULT,
    Event.Type.AGENT_RESUMED,
    Event.Type.FRAME_PUSHED,
    Event.Type.FRAME_POPPED,
}


def transcript_entry(e: Event) -> dict[str, Any]:
    """One event as the thread page shows it: `lane`, the instance whose chat folds it away;
    `instance`, the instance an INSTANCE_STARTED line holds the chat of."""
    lane = e.payload.get("lane") if e.type in FOLDED else None
    instance = e.payload.get("frame_id") if e.type == Event.Type.INSTANCE_STARTED else None
    return {
        "id": e.id,
        "type": e.type,
        "created_at": e.created_at,
        # Its text and block are shown cut at the value limit; the whole event is here.
        "url": excerpt.event_url(e.id),
        "suspension": str(e.suspension_id) if e.suspension_id else None,
        "lane": lane if isinstance(lane, int) else None,
        "instance": instance if isinstance(instance, int) else None,
        "instance_name": e.payload.get("instance") or "" if instance is not None else "",
        # A call's line goes when its card comes (a call that waits for a person is its card).
        "tool_use": e.payload.get("tool_use_id") or "" if e.type == Event.Type.TOOL_CALLED else "",
        # A card in the main transcript comes right after the agent's message that its prompt
        # repeats (a card of an instance does not: that message is folded in the instance's
        # chat).
        "said_above": e.type == Event.Type.AGENT_SUSPENDED
        and not isinstance(e.payload.get("lane"), int),
        **describe(e.type, e.payload, e.actor_name or None),
    }


# Status after an event.
STATUS_AFTER = {
    Event.Type.THREAD_STARTED: Thread.Status.RUNNING,
    Event.Type.USER_MESSAGE: Thread.Status.RUNNING,
    Event.Type.AGENT_RESUMED: Thread.Status.RUNNING,
    Event.Type.AGENT_SUSPENDED: Thread.Status.SUSPENDED,
    Event.Type.THREAD_WAITING: Thread.Status.WAITING_INPUT,
    Event.Type.THREAD_SUSPENDED: Thread.Status.SUSPENDED,
    Event.Type.THREAD_RESUMED: Thread.Status.RUNNING,
    Event.Type.THREAD_COMPLETED: Thread.Status.COMPLETED,
    Event.Type.THREAD_FAILED: Thread.Status.FAILED,
    Event.Type.THREAD_CANCELLING: Thread.Status.CANCELLING,
    Event.Type.THREAD_CANCELLED: Thread.Status.CANCELLED,
}
FINISHED = (Thread.Status.COMPLETED, Thread.Status.FAILED, Thread.Status.CANCELLED)


# The events thread_state reads: those that change the status or the stack.
STATE_TYPES = (*STATUS_AFTER, Event.Type.FRAME_PUSHED, Event.Type.FRAME_POPPED)


def state_events(thread: Thread) -> list[Event]:
    """The thread's events that thread_state reads, without the rest: a long run's page asks
    for its state after every event it is shown, and reading every event of the run (each
    line of text, each tool's result) each time grew with the run (bench/long_thread.py)."""
    rows = thread.events.filter(type__in=STATE_TYPES).order_by("id")
    return list(rows.only("id", "type", "payload"))


def thread_state(rows: list[Event], thread: Thread) -> tuple[str, list[str]]:
    """The thread's status and stack (frame labels, bottom first) after these events."""
    if not rows:
        frames = thread.frames.filter(status=StackFrame.Status.ACTIVE).order_by("depth")
        return thread.status, [f.label for f in frames]
    status, stack = thread.status, []
    for e in rows:
        if e.payload.get("lane") is not None:
            # An instance's frames are not the main stack, and its suspension does not stop
            # the thread: its siblings and the caller's batch go on (the API says "running").
            continue
        status = STATUS_AFTER.get(e.type, status)
        if e.type == Event.Type.THREAD_STARTED:
            stack = [e.payload.get("agent", thread.agent.name)]
        elif e.type == Event.Type.FRAME_PUSHED:
            stack.append(e.payload.get("frame", ""))
        elif e.type == Event.Type.FRAME_POPPED and stack and stack[-1] == e.payload.get("frame"):
            stack.pop()
        if status in FINISHED:
            stack = []
    return status, stack
