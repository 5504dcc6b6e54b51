"""A run's checkpoint: what a step did since its last write (its events, the suspensions it
resumed, an answer not yet saved), written with the frame in the step's transaction."""

from typing import Any
from uuid import UUID

from django.db import transaction

from agents import cancelling, events, statements
from agents.leases import Lease, LeaseLost
from agents.models import Event, StackFrame
from agents.runtime.turn import Frame
from agents.step import Step


class Checkpoint:
    """The step's writes not made yet, and the write that makes them (each inside the step's
    transaction, the lease renewed or given back by the caller)."""

    def __init__(self, lease: Lease) -> None:
        self.lease = lease
        self.buffered: list[Event] = []
        self.resumed: list[UUID] = []
        self.unsaved_answer = False  # an LLM answer not yet written to the frame's row

    def buffer(
        self, step: Step, type: str, payload: dict[str, Any], suspension_id: UUID | None = None
    ) -> None:
        """An event of this step, recorded at the next save."""
        self.buffered.append(
            Event(type=type, thread_id=step.thread.pk, suspension_id=suspension_id, payload=payload)
        )

    def resume(self, suspension_id: UUID) -> None:
        """A decided suspension whose result the step uses: marked resumed at the next save."""
        self.resumed.append(suspension_id)

    def tool_result(
        self,
        step: Step,
        tool_use: dict[str, Any],
        content: str,
        is_error: bool,
        decision: Any = None,
    ) -> None:
        """A tool's result as its TOOL_RESULT event says it."""
        payload = {
            "tool": tool_use["name"],
            "tool_use_id": tool_use["id"],
            "content": content,
            "is_error": is_error,
            **step.where(),
        }
        if decision is not None:
            payload["decision"] = decision.status
        self.buffer(step, Event.Type.TOOL_RESULT, payload)

    def save(
        self, step: Step, frame: Frame, row: StackFrame | None = None, ended: bool = False
    ) -> None:
        """Write the frame and what happened since the last checkpoint (inside a transaction).
        `ended`: the row's final status and result go with it."""
        row = row or step.row
        row.messages = frame.messages
        row.iteration = frame.iteration
        statements.save_frame(row, ended=ended)
        if self.unsaved_answer and step.live is not None:
            transaction.on_commit(step.live.message_saved)
        self.unsaved_answer = False
        if self.resumed:
            resumed = list(dict.fromkeys(self.resumed))
            statements.mark_resumed(resumed, self.lease.clock())
            self.resumed = []
        events.record_many(self.buffered)
        self.buffered = []

    def tool_returned(self, step: Step, frame: Frame) -> bool:
        """The checkpoint after a tool ran: its result saved with the step's events. True when
        the thread was being cancelled meanwhile: the result is saved all the same, the lease
        given back and the cancel finished if no other tool runs (agents.cancelling); the run
        stops there."""
        try:
            self.lease.renew(step)
        except LeaseLost:
            if not cancelling.waits_for(step.thread.pk, self.lease.owner, step.lane_id):
                raise
            self.save(step, frame)
            cancelling.tool_recorded(step.thread.pk, step.lane_id, self.lease.clock())
            return True
        self.save(step, frame)
        return False
