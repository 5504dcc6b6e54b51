"""Raising a frame's blocking calls as one group of suspensions, each under its policy."""

import functools
import uuid
from datetime import timedelta

from django.conf import settings
from django.db import transaction

from agents import (
    grants,
    policy,
    presentation,
    receipts,
    reminders,
    run_status,
    statements,
    versions,
)
from agents.models import AgentDefinition, Event, StackFrame, Suspension, Thread
from agents.payloads import suspension_payload
from agents.runtime.turn import Frame, TurnResult
from infra.compiled import insert


class SuspendSteps:
    """The part of agents.runs.Run that stops a frame for a decision."""

    def _suspend(self, frame: Frame, result: TurnResult, stack: list[StackFrame]) -> bool:
        """Raise the blocking calls as one group of suspensions, each under the policy in
        force (agents.policy), whose rules may decide it at once. Returns True when nothing
        is left pending (every call decided by policy): the loop goes on."""
        now = self.engine.clock()
        group = uuid.uuid4()
        lineage = " → ".join("main" if f.depth == 0 else f.label for f in self._ancestry(stack))
        with transaction.atomic():
            if self.lane is None:
                # Suspended, the lease given back, in the lease's check (the usual outcome,
                # made undone below when the policy decides every call).
                self._end(Thread.Status.SUSPENDED)
            else:
                self._renew()
            uses = list(dict.fromkeys(c.tool_use_id for c in result.blocking))
            known = statements.raised(self.row.pk, uses)
            # Whether any of the calls waits for a person: one raised before (a retried
            # step) and still pending, or one raised now that no rule decided.
            waiting = Suspension.Status.PENDING in known.values()
            agent_row = functools.cache(self._agent_row)
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
                in_force = policy.effective((agent_row() and agent_row().policy) or {}, call.tool)
                auto = policy.automatic(in_force, call.input)
                kept = policy.snapshot(in_force, self.thread)
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
                    }
                # No rule decided: a standing grant may (agents.grants), its use spent here.
                by_grant = (
                    None
                    if auto is not None
                    else grants.decide_by_grant(
                        self.row.agent_name,
                        call.tool.name,
                        call.input,
                        in_force,
                        self.thread,
                        call.tool.kind,
                        now,
                    )
                )
                if by_grant is not None:
                    kept["grant"] = by_grant.kept()
                    decided = by_grant.fields()
                s = Suspension(
                    thread=self.thread,
                    frame=self.row,
                    group=group,
                    agent_name=self.row.agent_name,
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
                        self.row.agent_name, call.tool, call.input, agent_row()
                    ),
                    policy=kept,
                    **decided,
                )
                if auto is not None or by_grant is not None:
                    # Signed before the insert, which writes it (the thread's row is locked:
                    # _end or _renew above).
                    receipts.issue(s, auto.decider() if auto else by_grant.decider())
                insert([s])  # as s.save() would, through a statement written once
                payload = {**suspension_payload(s), **self._where()}
                if decided:
                    # Raised as pending, then decided by its rule or grant, no person as actor.
                    payload = {**payload, "status": Suspension.Status.PENDING, "decision": None}
                self._buffer(Event.Type.AGENT_SUSPENDED, payload, suspension_id=s.pk)
                if by_grant is not None:
                    for type, body in by_grant.events(s):
                        self._buffer(type, body, suspension_id=s.pk)
                elif auto is not None:
                    decision = {"tool": s.tool_name, "agent": s.agent_name, **s.outcome()}
                    self._buffer(
                        Event.Type.SUSPENSION_DECIDED,
                        {**decision, **auto.payload()},
                        suspension_id=s.pk,
                    )
                else:
                    waiting = True
            self._save(frame)
            if not waiting:
                if self.lane is None:
                    self._hold()
                return True
            if self.lane is not None:
                # Only this instance waits; the thread and its other instances run on, unless
                # none is left working: the run is then suspended.
                self._idle_lane()
                run_status.settle(self.thread.pk, now)
            if self.live is not None:
                # In this transaction: the line says so when the suspension shows.
                self.live.activity("waiting for approval", alone=False)
                self.live = None  # the line stays until the frame works again
        self.released = True
        return False

    def _agent_row(self) -> AgentDefinition | None:
        """The row of the agent whose frame made the calls: its policy, ladder and version
        (no query for the thread's own agent, read with the thread at the step's start)."""
        if self.row.agent_name == self.thread.agent.name:
            return self.thread.agent
        return AgentDefinition.objects.filter(name=self.row.agent_name).first()

    def _ancestry(self, stack: list[StackFrame]) -> list[StackFrame]:
        """The frames from the main one down to the top of this run's stack: an instance's
        lane hangs under the frame that called it."""
        if self.lane is None:
            return stack
        above: list[StackFrame] = []
        parent_id = self.lane.parent_id
        while parent_id is not None:
            parent = StackFrame.objects.only(
                "pk", "parent_id", "depth", "agent_name", "agent_type", "instance"
            ).get(pk=parent_id)
            above.append(parent)
            parent_id = parent.parent_id
        return [*reversed(above), *stack]
