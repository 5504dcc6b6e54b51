"""Threads, frames and suspensions made directly through the models, for API tests that need
no engine: each builder writes the rows (and events) the engine would have written."""

import uuid
from datetime import timedelta
from typing import Any

from django.db import transaction
from django.utils import timezone

from agents import events, policy
from agents.models import AgentDefinition, Event, StackFrame, Suspension, Thread
from agents.payloads import suspension_payload
from agents.runtime.tools import registry

TRANSFER = {"from_account": "A-1", "to_account": "B-2", "amount": 200}


def agent(
    name: str = "payer", tools: tuple[str, ...] = ("transfer_funds", "ask_user")
) -> AgentDefinition:
    found, _ = AgentDefinition.objects.get_or_create(
        name=name, defaults={"model": "scripted", "tools": list(tools)}
    )
    return found


def thread(
    user: Any = None,
    *,
    agent_name: str = "payer",
    status: str = Thread.Status.RUNNING,
    frames: int = 1,
    messages: list[dict[str, Any]] | None = None,
) -> Thread:
    """A thread with a stack of `frames` active frames (depth 0 at the bottom)."""
    definition = agent(agent_name)
    row = Thread.objects.create(agent=definition, created_by=user, title="go", status=status)
    parent = None
    for depth in range(frames):
        parent = StackFrame.objects.create(
            thread=row,
            parent=parent,
            depth=depth,
            agent_name=definition.name if depth == 0 else f"helper{depth}",
            agent_type=StackFrame.Type.MAIN if depth == 0 else StackFrame.Type.AGENT,
            parent_tool_use_id="" if depth == 0 else f"toolu_child{depth}",
            messages=list(
                messages or [{"role": "user", "content": [{"type": "text", "text": "go"}]}]
            ),
            model="scripted",
            tools=list(definition.tools),
        )
    return row


def suspended(
    user: Any = None,
    *,
    calls: list[tuple[str, dict[str, Any]]] | None = None,
    agent_name: str = "payer",
    expires_in: float = 600,
    on_timeout: str = Suspension.OnTimeout.REJECT,
) -> tuple[Thread, list[Suspension]]:
    """A suspended thread whose top frame asked for `calls` (tool name, input) in one message,
    raised as one group of pending suspensions with their AGENT_SUSPENDED events."""
    calls = calls or [("transfer_funds", dict(TRANSFER))]
    ids = [f"toolu_{uuid.uuid4().hex[:12]}" for _ in calls]
    assistant = [{"type": "text", "text": "I need a decision."}] + [
        {"type": "tool_use", "id": tool_use_id, "name": name, "input": args}
        for tool_use_id, (name, args) in zip(ids, calls, strict=True)
    ]
    with transaction.atomic():
        row = thread(
            user,
            agent_name=agent_name,
            status=Thread.Status.SUSPENDED,
            messages=[
                {"role": "user", "content": [{"type": "text", "text": "go"}]},
                {"role": "assistant", "content": assistant},
            ],
        )
        frame = row.frames.get()
        group = uuid.uuid4()
        made = []
        for tool_use_id, (name, args) in zip(ids, calls, strict=True):
            tool = registry.get(name)
            assert tool is not None, name
            in_force = policy.effective(AgentDefinition.objects.get(name=agent_name).policy, tool)
            s = Suspension.objects.create(
                thread=row,
                frame=frame,
                group=group,
                agent_name=agent_name,
                lineage=agent_name,
                tool_use_id=tool_use_id,
                tool_name=name,
                tool_input=args,
                tool_schema=tool.input_schema,
                kind=tool.kind,
                prompt="I need a decision.",
                timeout=int(expires_in),
                expires_at=timezone.now() + timedelta(seconds=expires_in),
                on_timeout=on_timeout,
                policy=policy.snapshot(in_force, row),
            )
            events.record(
                Event.Type.AGENT_SUSPENDED,
                thread_id=row.pk,
                suspension_id=s.pk,
                payload=suspension_payload(s),
            )
            made.append(s)
    return row, made


def resume_url(s: Suspension, thread_id: Any = None) -> str:
    return f"/api/threads/{thread_id or s.thread_id}/suspensions/{s.pk}/resume"
