"""A worker's lease on a thread or on an agent instance's lane: claim, heartbeat, release.

The lease is short (THREAD_LEASE_SECONDS) and a heartbeat thread renews it while the worker
runs the thread, so a worker that dies (SIGKILL, a lost database connection) stops renewing
and the sweeper hands the thread to another worker within seconds; a live worker keeps it for
as long as a tool or a model call takes.
"""

import logging
import threading
import uuid
from collections.abc import Callable
from datetime import datetime, timedelta
from typing import Any
from uuid import UUID

from django.conf import settings
from django.db import DatabaseError, connection

from agents import locks, statements
from agents.models import StackFrame, Thread
from agents.step import Step

log = logging.getLogger(__name__)

ACTIVE = StackFrame.Status.ACTIVE


class LeaseLost(Exception):
    """Another worker took the thread over, or it was cancelled: stop without writing."""


def claim_lane(frame_id: int | str, owner: str, until: datetime, now: datetime) -> int:
    """Take an agent instance's lane if it is runnable and its lease is free; 1 when taken."""
    return (
        StackFrame.objects.filter(
            pk=frame_id, instance__gt=0, status=ACTIVE, runnable_since__isnull=False
        )
        .exclude(lease_expires_at__gt=now)
        .update(
            lease_owner=owner,
            lease_expires_at=until,
            runnable_since=now,
            requeues=0,
            running_tool="",  # a dead worker's: its tool did not return
        )
    )


def renew_lane(frame_id: int | str, owner: str, until: datetime, tool: str | None = None) -> int:
    """Extend an agent instance's lease held by `owner`, with the tool that starts running in
    its lane (empty: none runs; None: as it was); 0 when it is no longer held."""
    running = {} if tool is None else {"running_tool": tool[:200]}
    return StackFrame.objects.filter(pk=frame_id, lease_owner=owner, status=ACTIVE).update(
        lease_expires_at=until, **running
    )


def hold_thread(thread_id: UUID | str, owner: str, until: datetime) -> int:
    """The heartbeat's renewal of a thread's lease: as statements.renew_lease, while the
    thread runs or is being cancelled (the tool it waits for runs under this lease), and
    leaving its running tool as it is; 0 when it is no longer held."""
    return Thread.objects.filter(
        pk=thread_id,
        lease_owner=owner,
        status__in=(Thread.Status.RUNNING, Thread.Status.CANCELLING),
    ).update(lease_expires_at=until)


def release_thread(thread_id: UUID | str, owner: str) -> None:
    """Give the lease back so the next task may run the thread at once. On a broken
    connection this fails; the lease then runs out by itself within THREAD_LEASE_SECONDS,
    and the error that broke the step is the one the task sees."""
    try:
        Thread.objects.filter(pk=thread_id, lease_owner=owner).update(
            lease_owner="", lease_expires_at=None
        )
    except DatabaseError:
        log.warning("thread %s: the lease could not be released", thread_id, exc_info=True)


def release_lane(frame_id: int | str, owner: str) -> None:
    """release_thread for an agent instance's lane."""
    try:
        StackFrame.objects.filter(pk=frame_id, lease_owner=owner).update(
            lease_owner="", lease_expires_at=None
        )
    except DatabaseError:
        log.warning("instance %s: the lease could not be released", frame_id, exc_info=True)


class Heartbeat(threading.Thread):
    """Renews a held lease every third of THREAD_LEASE_SECONDS while the worker runs the
    thread. It stops renewing when the lease is no longer this worker's (cancelled, taken
    over); the worker learns that at its next checkpoint (Lease.renew raises LeaseLost).
    `lease_end` gives the renewed lease's end (Lease.until)."""

    def __init__(
        self,
        lease_end: Callable[[], datetime],
        thread_id: UUID | int | str,  # the instance's frame id for a lane
        owner: str,
        lane: bool = False,
    ) -> None:
        super().__init__(name=f"lease-{thread_id}", daemon=True)
        self.lease_end = lease_end
        self.thread_id = thread_id  # the instance's frame id for a lane
        self.owner = owner
        self.lane = lane
        self.interval = max(settings.THREAD_LEASE_SECONDS / 3, 0.05)
        self.stopped = threading.Event()

    def run(self) -> None:
        renewed = False
        renew: Callable[[Any, str, datetime], int] = renew_lane if self.lane else hold_thread
        try:
            while not self.stopped.wait(self.interval):
                renewed = True
                try:
                    held = renew(self.thread_id, self.owner, self.lease_end())
                except DatabaseError:
                    # The database is away: the next beat tries again; if the lease runs out
                    # meanwhile, the checkpoint after the step notices.
                    log.warning("thread %s: lease renewal failed", self.thread_id, exc_info=True)
                    continue
                if not held:
                    return
        finally:
            if renewed:
                # This thread's own connection (asking for it in a thread that made no query
                # would set one up just to close it, on every step).
                connection.close()

    def stop(self) -> None:
        self.stopped.set()


class Lease:
    """One worker's lease while it runs a thread (or a lane), as a run's steps change it:
    renewed at each checkpoint, given back with the step that stops the run (`released`
    then, so the worker does not give it back again)."""

    def __init__(self, clock: Callable[[], datetime], owner: str | None = None) -> None:
        self.clock = clock
        self.owner = owner or uuid.uuid4().hex
        self.released = False  # a committed status change gave the lease back

    def until(self) -> datetime:
        """The end of the lease when it is taken or renewed now."""
        return self.clock() + timedelta(seconds=settings.THREAD_LEASE_SECONDS)

    def renew(self, step: Step, tool: str = "") -> None:
        """Extend the lease, saying which tool starts running (empty: none runs now); fails
        when the thread was cancelled, is being cancelled, or was taken over."""
        if step.lane is not None:
            # The thread's row first, as cancel_thread and wake_parent take it before frames,
            # and as the events' hash chain (agents.chain) takes it anyway: locking the frame
            # first would deadlock with a cancel.
            row = locks.thread_values(step.thread.pk, "status")
            n = (
                row is not None
                and row[0] != Thread.Status.CANCELLING
                and renew_lane(step.lane.pk, self.owner, self.until(), tool)
            )
        else:
            n = statements.renew_lease(step.thread.pk, self.owner, self.until(), tool)
        if not n:
            raise LeaseLost(step.thread.pk)

    def end(self, step: Step, status: str) -> None:
        """The thread's new status (with its result and error), the lease given back, if the
        lease is still this run's; else LeaseLost (the transaction rolls back). One statement
        where renew and give_back are two; the thread's row is locked first, as
        cancel_thread and the events' chain take it."""
        thread = step.thread
        now = self.clock()
        n = statements.end_step(thread.pk, self.owner, status, thread.result, thread.error, now)
        if not n:
            raise LeaseLost(thread.pk)
        thread.status = status
        thread.lease_owner = ""
        thread.lease_expires_at = None
        thread.updated_at = now

    def hold(self, step: Step) -> None:
        """Undo `end` in the same transaction: the thread runs on under this lease."""
        expires = self.until()
        Thread.objects.filter(pk=step.thread.pk).update(
            status=Thread.Status.RUNNING, lease_owner=self.owner, lease_expires_at=expires
        )
        step.thread.status = Thread.Status.RUNNING
        step.thread.lease_owner = self.owner
        step.thread.lease_expires_at = expires

    def give_back(self, step: Step, status: str, extra: list[str] | None = None) -> None:
        """The last write of a step: the thread's new status, and the lease given back with
        it (`extra`: the thread's other fields the step changed)."""
        step.thread.status = status
        step.thread.lease_owner = ""
        step.thread.lease_expires_at = None
        step.thread.save(
            update_fields=[
                "status",
                "lease_owner",
                "lease_expires_at",
                "updated_at",
                *(extra or []),
            ]
        )

    def idle_lane(self, step: Step) -> None:
        """The lane stops until a decision or its instances wake it; the lease goes back."""
        assert step.lane is not None
        StackFrame.objects.filter(pk=step.lane.pk, lease_owner=self.owner).update(
            runnable_since=None, lease_owner="", lease_expires_at=None
        )
