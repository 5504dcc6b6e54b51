"""Requests raised by agents that run outside the gateway (POST /api/requests).

An outside agent keeps its own loop; the gateway does the human part. Each of its runs is a
thread of the gateway (Thread.external_run_id) with one frame that holds nothing to resume,
and each request a suspension of that frame, made as the engine makes one for a blocking tool
(agents.suspending): the same policy, deadline, reminders and events, so the inbox, the
deadline sweeper, webhooks, emails and the audit trail treat it like any other.

The thread stays `running` with no `runnable_since`: agents.groups resumes only `suspended`
threads and agents.deadlines.requeue_stalled only those with a runnable_since, so no worker
ever takes it. A decision is taken by agents.door.take (the one door for decisions)
and read back by the outside agent; when the agent that asked first reads it, AGENT_RESUMED
says so.
"""

import uuid
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from django.db import transaction
from django.utils import timezone

from agents import events, grants, history, locks, policy, presentation, receipts, reminders
from agents.hashing import canonical_hash
from agents.models import AgentDefinition, Event, StackFrame, Suspension, Thread
from agents.payloads import suspension_payload
from agents.reviewing import asking
from agents.runtime.tools import BLOCKING, Tool

# An outside agent's frame: no model of the gateway runs it.
MODEL = "external"
DESCRIPTION = "An agent that runs outside the gateway and asks through POST /api/requests."


@dataclass(frozen=True)
class Request:
    """What an outside agent asks, as POST /api/requests checked it."""

    agent: str
    run_id: str
    tool: str
    arguments: dict[str, Any]
    schema: dict[str, Any]
    prompt: str
    kind: str  # Suspension.Kind
    timeout: int  # seconds
    on_timeout: str  # Suspension.OnTimeout
    key: str  # the idempotency key: one request per key within a run
    # How the card explains the call (agents.presentation): the tool's description, a summary
    # template over the arguments, reasons offered for a rejection.
    description: str = ""
    summary: str | None = None
    reject_reasons: tuple[str, ...] = ()
    risk: str = "normal"
    # Its call cannot be undone: a reviewing model never decides it unless its setting allows
    # (agents.reviewing.asking); an MCP server's tool_overrides say so.
    irreversible: bool = False
    # The run's title, when its first request starts it (default: "<agent> run <run_id>").
    title: str = ""


class RunEnded(Exception):
    """The run's thread has ended (a reviewer cancelled it): it takes no more requests."""

    def __init__(self, thread: Thread) -> None:
        super().__init__(thread.status)
        self.thread = thread


def agent_for(name: str, user: Any) -> AgentDefinition:
    """The agent definition an outside agent's runs hang on: the one of that name (an agent
    file may define it, with its policy and reminders), else a new one with no policy."""
    from agents import versions

    agent, created = AgentDefinition.objects.get_or_create(
        name=name, defaults={"model": MODEL, "description": DESCRIPTION}
    )
    if created:
        versions.record(agent, user)
    return agent


def find(user: Any, agent: AgentDefinition, run_id: str, key: str) -> Suspension | None:
    """The request this caller already raised with `key` in that run, if any."""
    return (
        Suspension.objects.select_related("thread")
        .filter(
            thread__agent=agent,
            thread__created_by=user,
            thread__external_run_id=run_id,
            tool_use_id=key,
        )
        .first()
    )


def same_request(s: Suspension, request: Request) -> bool:
    """Is `s` what `request` asks again (the same key may not stand for another request)?"""
    return s.tool_name == request.tool and s.args_hash == canonical_hash(request.arguments)


def raise_request(
    agent: AgentDefinition,
    rules: AgentDefinition,
    request: Request,
    user: Any,
    now: datetime | None = None,
) -> Suspension:
    """Make the suspension for `request` (and its run's thread, the first time), under the
    policy and ladder of `rules` (an agent definition: the asking agent's own, or the one the
    request names). One transaction; a request its rules decide at once is made decided.

    Raises RunEnded, or IntegrityError when another call made the same request (or the run's
    thread) meanwhile: the caller reads that one back (approvals.api.external)."""
    now = now or timezone.now()
    with transaction.atomic():
        thread = locks.thread(agent=agent, created_by=user, external_run_id=request.run_id)
        if thread is None:
            thread, frame = _start(agent, request, user)
        elif thread.finished:
            raise RunEnded(thread)
        else:
            frame = thread.frames.get(depth=0)
        tool = Tool(
            name=request.tool,
            description=request.description,
            input_schema=request.schema,
            execution_mode=BLOCKING,
            timeout=request.timeout,
            on_timeout=request.on_timeout,
            kind=request.kind,
            summary=request.summary,
            reject_reasons=request.reject_reasons,
            risk=request.risk,
            irreversible=request.irreversible,
        )
        shown = presentation.snapshot(tool)
        if request.kind == Suspension.Kind.CONFIRMATION:
            shown["approve_does"] = f"The agent runs {request.tool} with these arguments."
        expires_at = now + timedelta(seconds=request.timeout)
        in_force = policy.effective(rules.policy or {}, tool)
        # The rules, with their counts and sums over history (agents.history); an outside
        # agent's tool carries no taint flags.
        assessed = history.assess(in_force, agent.name, tool, request.arguments, thread, now)
        auto = assessed.auto
        kept = policy.snapshot(in_force, thread)
        if assessed.needs_person:
            kept["needs_person"] = assessed.needs_person
        decided: dict[str, Any] = {}
        if auto is not None:
            kept["auto"] = auto.payload()
            decided = {
                "status": Suspension.Status.APPROVED
                if auto.approved
                else Suspension.Status.REJECTED,
                "approved": auto.approved,
                "reason": auto.reason,
                "decided_by_name": "policy",
                "decided_at": now,
                "tier": auto.tier,
            }
        # No rule decided: a standing grant may (agents.grants), its use spent here.
        by_grant = (
            None
            if auto is not None
            else grants.decide_by_grant(
                agent.name, request.tool, request.arguments, in_force, thread, request.kind, now
            )
        )
        if by_grant is not None:
            kept["grant"] = by_grant.kept()
            decided = by_grant.fields()
        s = Suspension(
            thread=thread,
            frame=frame,
            group=uuid.uuid4(),
            agent_name=agent.name,
            lineage="main",
            tool_use_id=request.key,
            tool_name=request.tool,
            tool_input=request.arguments,
            tool_schema=request.schema,
            kind=request.kind,
            prompt=request.prompt,
            timeout=request.timeout,
            expires_at=expires_at,
            on_timeout=request.on_timeout,
            **reminders.ladder_fields(reminders.ladder_of(rules), expires_at, now),
            # The tool is the outside agent's, not the gateway's: no digest to compare later.
            args_hash=canonical_hash(request.arguments),
            agent_version=agent.version,
            tool_digest="",
            policy=kept,
            presentation=shown,
            **decided,
        )
        # Left to people: a reviewing model may look first (agents.reviewing).
        asking.ask_later(s, tool)
        # Under the thread's lock (taken above, or the thread is new in this transaction).
        if auto is not None:
            receipts.issue(s, auto.decider())
        elif by_grant is not None:
            receipts.issue(s, by_grant.decider())
        s.save(force_insert=True)
        where = {"frame": agent.name, "depth": 0, "external_run_id": request.run_id}
        payload = {**suspension_payload(s), **where}
        if decided:
            # Raised as pending, then decided by its rule or grant, no person as actor.
            payload = {**payload, "status": Suspension.Status.PENDING, "decision": None}
        events.record(
            Event.Type.AGENT_SUSPENDED,
            thread_id=thread.id,
            suspension_id=s.pk,
            actor=user,
            payload=payload,
        )
        for type, body in by_grant.events(s) if by_grant is not None else []:
            events.record(type, thread_id=thread.id, suspension_id=s.pk, payload=body)
        if auto is not None:
            events.record(
                Event.Type.SUSPENSION_DECIDED,
                thread_id=thread.id,
                suspension_id=s.pk,
                payload={
                    "tool": s.tool_name,
                    "agent": s.agent_name,
                    **s.outcome(),
                    **auto.payload(),
                },
            )
    return s


def _start(agent: AgentDefinition, request: Request, user: Any) -> tuple[Thread, StackFrame]:
    thread = Thread.objects.create(
        agent=agent,
        created_by=user,
        created_by_name=getattr(user, "username", ""),
        title=(request.title or f"{agent.name} run {request.run_id}")[:200],
        status=Thread.Status.RUNNING,
        external_run_id=request.run_id,
    )
    frame = StackFrame.objects.create(
        thread=thread,
        depth=0,
        agent_name=agent.name,
        agent_type=StackFrame.Type.MAIN,
        model=MODEL,
        max_iterations=0,
    )
    events.record(
        Event.Type.THREAD_STARTED,
        thread_id=thread.id,
        actor=user,
        payload={
            "agent": agent.name,
            "message": thread.title,
            "status": thread.status,
            "external_run_id": request.run_id,
        },
    )
    return thread, frame


def acknowledge(s: Suspension, user: Any, now: datetime | None = None) -> bool:
    """The agent that asked has read the decision: resumed_at and AGENT_RESUMED record when
    it went on (once; a later read changes nothing). True when this call recorded it."""
    if s.pending or s.resumed_at is not None or s.thread.created_by_id != user.pk:
        return False
    now = now or timezone.now()
    with transaction.atomic():
        n = Suspension.objects.filter(pk=s.pk, resumed_at__isnull=True).update(resumed_at=now)
        if not n:
            return False
        s.resumed_at = now
        events.record(
            Event.Type.AGENT_RESUMED,
            thread_id=s.thread_id,
            suspension_id=s.pk,
            actor=user,
            payload={
                "tool": s.tool_name,
                "status": s.status,
                "approved": s.approved,
                "frame": s.agent_name,
                "depth": 0,
                "external_run_id": s.thread.external_run_id,
            },
        )
    return True


def request_payload(s: Suspension) -> dict[str, Any]:
    """A request as its asker reads it: the suspension, its run, and what to do now:
    `arguments` are the ones to run the tool with once approved (a reviewer's edit, else the
    arguments as sent), None while pending or when it was not approved."""
    approved = s.status in (Suspension.Status.APPROVED, Suspension.Status.TIMED_OUT) and bool(
        s.approved
    )
    arguments = None
    if approved and s.kind == Suspension.Kind.CONFIRMATION:
        arguments = s.modified_args if s.modified_args is not None else s.tool_input
    return {
        **suspension_payload(s),
        "run_id": s.thread.external_run_id,
        "idempotency_key": s.tool_use_id,
        "approved": None if s.pending else approved,
        "arguments": arguments,
        "response": s.response,
        "reason": s.reason or None,
        "decided_by": s.decided_by_name or None,
        # The decision's signed receipt (agents.receipts): verify it before acting on it.
        "receipt": s.receipt or None,
        "url": f"/threads/{s.thread_id}/",
    }
