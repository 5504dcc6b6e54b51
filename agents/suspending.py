"""Raising a frame's blocking calls as one group of suspensions, each under its policy."""

import functools
import uuid
from datetime import timedelta

from django.conf import settings
from django.db import transaction

from agents import (
    dispatch,
    grants,
    history,
    policy,
    presentation,
    receipts,
    reminders,
    run_status,
    statements,
    versions,
)
from agents.checkpoints import Checkpoint
from agents.leases import Lease
from agents.models import AgentDefinition, Event, StackFrame, Suspension, Thread
from agents.payloads import suspension_payload
from agents.reviewing import asking
from agents.runtime import messages as msgs
from agents.runtime.turn import Decision, Frame, TurnResult
from agents.step import Step
from infra.compiled import insert


class Suspensions:
    """A frame's suspensions: the decided ones its step resumes with, and the group its
    blocking calls raise, each under its policy."""

    def __init__(self, lease: Lease, checkpoint: Checkpoint) -> None:
        self.lease = lease
        self.checkpoint = checkpoint

    def decisions(self, step: Step, frame: Frame) -> dict[str, Decision]:
        """Decided suspensions of this frame whose tool uses still wait for a result."""
        waiting = {u["id"] for u in msgs.unresolved_tool_uses(frame.messages)}
        if not waiting:
            return {}
        decided = statements.decided(step.row.pk, sorted(waiting))
        result = {}
        for s in decided:
            result[s.tool_use_id] = Decision(
                status=s.status,
                approved=bool(s.approved),
                reason=s.reason,
                modified_args=s.modified_args,
                response=s.response,
                decided_by=s.decided_by_name or None,
            )
            if s.resumed_at is None:
                self.checkpoint.resume(s.pk)
                self.checkpoint.buffer(
                    step,
                    Event.Type.AGENT_RESUMED,
                    {
                        "tool": s.tool_name,
                        "status": s.status,
                        "approved": s.approved,
                        **step.where(),
                    },
                    suspension_id=s.pk,
                )
        return result

    def suspend(
        self, step: Step, frame: Frame, result: TurnResult, stack: list[StackFrame]
    ) -> bool:
        """Raise the blocking calls as one group of suspensions, each under the policy in
        force (agents.policy), whose rules may decide it at once. Returns True when nothing
        is left pending (every call decided by policy): the loop goes on."""
        now = self.lease.clock()
        group = uuid.uuid4()
        lineage = " → ".join("main" if f.depth == 0 else f.label for f in _ancestry(step, stack))
        with transaction.atomic():
            if step.lane is None:
                # Suspended, the lease given back, in the lease's check (the usual outcome,
                # made undone below when the policy decides every call).
                self.lease.end(step, Thread.Status.SUSPENDED)
            else:
                self.lease.renew(step)
            uses = list(dict.fromkeys(c.tool_use_id for c in result.blocking))
            known = statements.raised(step.row.pk, uses)
            # Whether any of the calls waits for a person: one raised before (a retried
            # step) and still pending, or one raised now that no rule decided.
            waiting = Suspension.Status.PENDING in known.values()
            agent_row = functools.cache(lambda: _agent_row(step))
            agent_ladder = functools.cache(lambda: reminders.ladder_of(agent_row()))
            for call in result.blocking:
                if call.tool_use_id in known:
                    continue
                timeout = call.tool.timeout or settings.DEFAULT_BLOCKING_TIMEOUT
                expires_at = now + timedelta(seconds=timeout)
                # The tool's own ladder (its declaration and this agent's tool_overrides),
                # else the agent's: taken whole from one place, so a step number means the
                # reminders it was written beside.
                steps = call.tool.ladder() or agent_ladder()
                row = agent_row()
                in_force = policy.effective((row.policy if row else None) or {}, call.tool)
                # The rules, read with the run's history (counts, sums, taint: agents.history).
                assessed = history.assess(
                    in_force,
                    step.row.agent_name,
                    call.tool,
                    call.input,
                    step.thread,
                    now,
                    self.checkpoint.buffered,
                )
                auto = assessed.auto
                kept = policy.snapshot(in_force, step.thread)
                if assessed.needs_person:
                    kept["needs_person"] = assessed.needs_person
                decided = {}
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
                # No rule decided: a standing grant may (agents.grants), its use spent here;
                # none may approve a tainted call.
                by_grant = (
                    None
                    if auto is not None or assessed.tainted
                    else grants.decide_by_grant(
                        step.row.agent_name,
                        call.tool.name,
                        call.input,
                        in_force,
                        step.thread,
                        call.tool.kind,
                        now,
                    )
                )
                if by_grant is not None:
                    kept["grant"] = by_grant.kept()
                    decided = by_grant.fields()
                s = Suspension(
                    thread=step.thread,
                    frame=step.row,
                    group=group,
                    agent_name=step.row.agent_name,
                    lineage=lineage,
                    tool_use_id=call.tool_use_id,
                    tool_name=call.tool.name,
                    tool_input=call.input,
                    tool_schema=call.tool.input_schema,
                    presentation=presentation.snapshot(call.tool),
                    kind=call.tool.kind,
                    prompt=call.preceding_text,
                    timeout=timeout,
                    expires_at=expires_at,
                    on_timeout=call.tool.on_timeout,
                    **reminders.ladder_fields(steps, expires_at, now),
                    **versions.binding_fields(
                        step.row.agent_name, call.tool, call.input, agent_row()
                    ),
                    policy=kept,
                    **decided,
                )
                # Left to people: a reviewing model may look first (agents.reviewing).
                asking.ask_later(s, call.tool)
                # Signed before the insert, which writes it (the thread's row is locked:
                # Lease.end or Lease.renew above).
                if auto is not None:
                    receipts.issue(s, auto.decider())
                elif by_grant is not None:
                    receipts.issue(s, by_grant.decider())
                insert([s])  # as s.save() would, through a statement written once
                if not decided and timeout <= settings.SWEEP_IDLE_SECONDS:
                    # It may fall before the clock next wakes (agents.due).
                    dispatch.at_deadline(dispatch.EXPIRE_SUSPENSION, s.pk, expires_at)
                payload = {**suspension_payload(s), **step.where()}
                if decided:
                    # Raised as pending, then decided by its rule or grant, no person as actor.
                    payload = {**payload, "status": Suspension.Status.PENDING, "decision": None}
                self.checkpoint.buffer(
                    step, Event.Type.AGENT_SUSPENDED, payload, suspension_id=s.pk
                )
                if by_grant is not None:
                    for type, body in by_grant.events(s):
                        self.checkpoint.buffer(step, type, body, suspension_id=s.pk)
                elif auto is not None:
                    decision = {"tool": s.tool_name, "agent": s.agent_name, **s.outcome()}
                    self.checkpoint.buffer(
                        step,
                        Event.Type.SUSPENSION_DECIDED,
                        {**decision, **auto.payload()},
                        suspension_id=s.pk,
                    )
                else:
                    waiting = True
            self.checkpoint.save(step, frame)
            if not waiting:
                if step.lane is None:
                    self.lease.hold(step)
                return True
            if step.lane is not None:
                # Only this instance waits; the thread and its other instances run on, unless
                # none is left working: the run is then suspended.
                self.lease.idle_lane(step)
                run_status.settle(step.thread.pk, now)
            if step.live is not None:
                # In this transaction: the line says so when the suspension shows.
                step.live.activity("waiting for approval", alone=False)
                step.live = None  # the line stays until the frame works again
        self.lease.released = True
        return False


def _agent_row(step: Step) -> AgentDefinition | None:
    """The row of the agent whose frame made the calls: its policy, ladder and version
    (no query for the thread's own agent, read with the thread at the step's start)."""
    if step.row.agent_name == step.thread.agent.name:
        return step.thread.agent
    return AgentDefinition.objects.filter(name=step.row.agent_name).first()


def _ancestry(step: Step, stack: list[StackFrame]) -> list[StackFrame]:
    """The frames from the main one down to the top of this run's stack: an instance's
    lane hangs under the frame that called it."""
    if step.lane is None:
        return stack
    above: list[StackFrame] = []
    parent_id = step.lane.parent_id
    while parent_id is not None:
        parent = StackFrame.objects.only(
            "pk", "parent_id", "depth", "agent_name", "agent_type", "instance"
        ).get(pk=parent_id)
        above.append(parent)
        parent_id = parent.parent_id
    return [*reversed(above), *stack]
