"""A group of suspensions raised together: once none of it waits, its frame runs again."""

from datetime import datetime
from typing import Any

from django.db.models import Exists

from agents import dispatch, run_status, statements
from agents.models import StackFrame, Suspension, Thread

S = Suspension.Status


def resume_if_group_done(s: Suspension, now: datetime) -> None:
    """The thread (or the agent instance) runs again once none of the group waits; the
    caller holds the thread's lock."""
    # One statement for the common case, a frame of the main stack: the thread is made
    # runnable if none of the group still waits.
    if statements.resume_main_stack(s.thread_id, s.group, s.frame_id, now):
        dispatch.enqueue_thread(s.thread_id)
        return
    # Not the main stack's (an agent instance's frame has a lane), or still waiting: the
    # lane, when there is one and none of the group waits.
    pending = Suspension.objects.filter(group=s.group, status=S.PENDING)
    lane = StackFrame.objects.filter(pk=s.frame_id).values_list("lane_id", flat=True).first()
    if lane is not None:
        resume_lanes([lane], now, unless=Exists(pending))
        return
    # The main stack's, with the thread running: its instances work (or one was let go on)
    # while the main frame waits for this decision too. It runs at once, as from suspended;
    # it then waits for its instances again (agents.run_status). An outside agent's run has
    # nothing to resume.
    n = (
        Thread.objects.filter(
            pk=s.thread_id,
            status=Thread.Status.RUNNING,
            runnable_since__isnull=True,
            external_run_id="",
        )
        .exclude(lease_expires_at__gt=now)
        .filter(~Exists(pending))
        .update(runnable_since=now, updated_at=now)
    )
    if n:
        dispatch.enqueue_thread(s.thread_id)


def resume_lanes(lanes: list[int], now: datetime, unless: Any = None) -> None:
    """Agent instances whose suspensions are all decided run again (the thread's other
    instances, and its main stack, never stopped for them); none if `unless` (an Exists)
    holds."""
    found = StackFrame.objects.filter(
        pk__in=lanes, status=StackFrame.Status.ACTIVE, runnable_since__isnull=True
    )
    if unless is not None:
        found = found.filter(~unless)
    runnable = dict(found.values_list("pk", "thread_id"))
    if not runnable:
        return
    StackFrame.objects.filter(pk__in=runnable).update(runnable_since=now)
    # A run that was suspended because every instance waited is running again.
    run_status.lanes_resumed(list(runnable.values()), now)
    for pk in runnable:
        dispatch.enqueue_instance(pk)
