"""A run's checkpoints: the frame, the step's events, and the lease renewed or given back."""

from typing import Any
from uuid import UUID

from django.db import transaction

from agents import cancelling, events, statements
from agents.leases import LeaseLost, renew_lane
from agents.models import Event, StackFrame, Thread
from agents.runtime import messages as msgs
from agents.runtime.turn import Decision, Frame


class Checkpoints:
    """The writes of agents.runs.Run (whose attributes these methods use): each inside the
    step's transaction."""

    def _where(self) -> dict[str, Any]:
        return {
            "agent": self.row.agent_name,
            "frame": self.row.label,
            "frame_id": self.row.pk,
            "depth": self.row.depth,
            "lane": self.lane.pk if self.lane is not None else None,
            "instance": self.lane.instance_name if self.lane is not None else None,
        }

    def _buffer(
        self, type: str, payload: dict[str, Any], suspension_id: UUID | None = None
    ) -> None:
        self.buffered.append(
            Event(type=type, thread_id=self.thread.pk, suspension_id=suspension_id, payload=payload)
        )

    def _renew(self, tool: str = "") -> None:
        """Extend the lease, saying which tool starts running (empty: none runs now); fails
        when the thread was cancelled, is being cancelled, or was taken over."""
        if self.lane is not None:
            # The thread's row first, as cancel_thread and wake_parent take it before frames,
            # and as the events' hash chain (agents.chain) takes it anyway: locking the frame
            # first would deadlock with a cancel.
            status = (
                Thread.objects.select_for_update(no_key=True)
                .filter(pk=self.thread.pk)
                .values_list("status", flat=True)
                .first()
            )
            n = status != Thread.Status.CANCELLING and renew_lane(
                self.lane.pk, self.owner, self.engine._lease_end(), tool
            )
        else:
            n = statements.renew_lease(self.thread.pk, self.owner, self.engine._lease_end(), tool)
        if not n:
            raise LeaseLost(self.thread.pk)

    def _tool_returned(self, frame: Frame) -> bool:
        """The checkpoint after a tool ran: its result saved with the step's events. True when
        the thread was being cancelled meanwhile: the result is saved all the same, the lease
        given back and the cancel finished if no other tool runs (agents.cancelling); the run
        stops there."""
        lane = self.lane.pk if self.lane is not None else None
        try:
            self._renew()
        except LeaseLost:
            if not cancelling.waits_for(self.thread.pk, self.owner, lane):
                raise
            self._save(frame)
            cancelling.tool_recorded(self.thread.pk, lane, self.engine.clock())
            return True
        self._save(frame)
        return False

    def _save(self, frame: Frame, row: StackFrame | None = None, ended: bool = False) -> None:
        """Write the frame and what happened since the last checkpoint (inside a transaction).
        `ended`: the row's final status and result go with it."""
        row = row or self.row
        row.messages = frame.messages
        row.iteration = frame.iteration
        statements.save_frame(row, ended=ended)
        if self.unsaved_answer and self.live is not None:
            transaction.on_commit(self.live.message_saved)
        self.unsaved_answer = False
        if self.resumed:
            resumed = list(dict.fromkeys(self.resumed))
            statements.mark_resumed(resumed, self.engine.clock())
            self.resumed = []
        events.record_many(self.buffered)
        self.buffered = []

    def _decisions(self, frame: Frame) -> dict[str, Decision]:
        """Decided suspensions of this frame whose tool uses still wait for a result."""
        waiting = {u["id"] for u in msgs.unresolved_tool_uses(frame.messages)}
        if not waiting:
            return {}
        decided = statements.decided(self.row.pk, sorted(waiting))
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
                self.resumed.append(s.pk)
                self._buffer(
                    Event.Type.AGENT_RESUMED,
                    {
                        "tool": s.tool_name,
                        "status": s.status,
                        "approved": s.approved,
                        **self._where(),
                    },
                    suspension_id=s.pk,
                )
        return result

    def _close_live(self, alone: bool = True) -> None:
        """The frame stops working: its live view goes with the step's last commit, so no page
        sees a live line after the thread's end (LiveWriter.close is safe in a transaction).
        `alone=False`: no savepoint of its own; a failure fails the step's transaction."""
        if self.live is not None:
            self.live.close(alone=alone)
            self.live = None

    def _idle_lane(self) -> None:
        """The lane stops until a decision or its instances wake it; the lease goes back."""
        StackFrame.objects.filter(pk=self.lane.pk, lease_owner=self.owner).update(
            runnable_since=None, lease_owner="", lease_expires_at=None
        )

    def _end(self, status: str) -> None:
        """The thread's new status (with its result and error), the lease given back, if the
        lease is still this run's; else LeaseLost (the transaction rolls back). One statement
        where _renew and _set_status are two; the thread's row is locked first, as
        cancel_thread and the events' chain take it."""
        now = self.engine.clock()
        n = statements.end_step(
            self.thread.pk, self.owner, status, self.thread.result, self.thread.error, now
        )
        if not n:
            raise LeaseLost(self.thread.pk)
        self.thread.status = status
        self.thread.lease_owner = ""
        self.thread.lease_expires_at = None
        self.thread.updated_at = now

    def _hold(self) -> None:
        """Undo _end in the same transaction: the thread runs on under this run's lease."""
        expires = self.engine._lease_end()
        Thread.objects.filter(pk=self.thread.pk).update(
            status=Thread.Status.RUNNING, lease_owner=self.owner, lease_expires_at=expires
        )
        self.thread.status = Thread.Status.RUNNING
        self.thread.lease_owner = self.owner
        self.thread.lease_expires_at = expires

    def _set_status(self, status: str, extra: list[str] | None = None) -> None:
        """The last write of a step: the new status, and the lease given back with it."""
        self.thread.status = status
        self.thread.lease_owner = ""
        self.thread.lease_expires_at = None
        self.thread.save(
            update_fields=[
                "status",
                "lease_owner",
                "lease_expires_at",
                "updated_at",
                *(extra or []),
            ]
        )
