"""Starting a thread: its row, its main frame and THREAD_STARTED, then a worker."""

from typing import Any

from django.db import transaction
from django.utils import timezone

from agents import chain, dispatch, events
from agents.models import AgentDefinition, Event, StackFrame, Thread
from agents.runtime import subagents
from agents.runtime.subagents import AgentSpec
from infra.compiled import insert


def find_agent(name: str) -> AgentSpec | None:
    """The runtime's view of a stored agent (the engine's `AgentResolver`)."""
    agent = AgentDefinition.objects.filter(name=name).first()
    return agent.as_spec() if agent is not None else None


def start_thread(agent: AgentDefinition, message: str, user: Any) -> Thread:
    main = subagents.build_frame(agent.as_spec(), StackFrame.Type.MAIN, message, find_agent)
    # No savepoint inside a caller's transaction (the pending cap's, access.admission):
    # every caller lets a failure end that transaction too, so one would only cost two
    # statements.
    with transaction.atomic(savepoint=False):
        # Inserted through infra.compiled.insert, as Model.save would (a statement each,
        # written once per process).
        thread = Thread(
            agent=agent,
            created_by=user,
            created_by_name=getattr(user, "username", ""),
            title=message[:200],
            status=Thread.Status.RUNNING,
            runnable_since=timezone.now(),
        )
        insert([thread])
        chain.begun(thread.id)
        frame = StackFrame(
            thread=thread,
            depth=0,
            agent_name=main.agent_name,
            agent_type=StackFrame.Type.MAIN,
            messages=main.messages,
            system_prompt=main.system_prompt,
            model=main.model,
            max_iterations=main.max_iterations,
            max_tokens=main.max_tokens,
            tools=main.tools,
            tool_overrides=main.tool_overrides,
        )
        insert([frame])
        event = events.record(
            Event.Type.THREAD_STARTED,
            thread_id=thread.id,
            actor=user,
            payload={"agent": agent.name, "message": message, "status": thread.status},
        )
        dispatch.enqueue_thread(thread.id, dispatch.START_THREAD)
    # What the start wrote, for an answer that need not read it back (approvals.api).
    thread.started = (frame, event)
    return thread
