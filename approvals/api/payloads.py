"""A run as the API answers it: its stack, pending suspensions, instances, usage, live text."""

from typing import Any

from django.db.models import Max, Q, Sum

from agents.models import LiveText, ReviewCall, StackFrame, Suspension, Thread
from agents.payloads import suspension_payload


def waiting_for_person() -> Q:
    """Threads a person must act on: waiting for a reply, or with a pending suspension."""
    return Q(status=Thread.Status.WAITING_INPUT) | Q(
        status__in=(Thread.Status.SUSPENDED, Thread.Status.RUNNING),
        suspensions__status=Suspension.Status.PENDING,
    )


def thread_payload(thread: Thread) -> dict[str, Any]:
    started = getattr(thread, "started", None)
    if started is not None:
        # Made by this request (agents.starting.start_thread): what it wrote is the whole
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
    # A reviewing model's calls about the thread's requests (agents.reviewing), as `model:<name>`.
    reviews = (
        ReviewCall.objects.filter(thread=thread)
        .order_by("model")
        .values("model")
        .annotate(input_tokens=Sum("input_tokens"), output_tokens=Sum("output_tokens"))
    )
    for r in reviews:
        by_agent[f"model:{r['model']}"] = {
            "input_tokens": r["input_tokens"],
            "output_tokens": r["output_tokens"],
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
