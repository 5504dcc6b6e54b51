"""A run's status while its agent instances wait: `suspended` once nothing of it works and a
request waits, `running` again when a decision or a deadline lets an instance go on.

The main stack's own suspensions set the status where they are raised (agents.suspending,
through Checkpoints._end) and decided (agents.decisions.decide). An agent instance stops on
its own lane, beside the main stack, which meanwhile waits for its instances with the thread
`running`, no lease and no `runnable_since`: without these two transitions such a run said
`running` while every frame of it waited for a person.

Both are called with the thread's row locked, as every step that starts or stops a frame
takes it first, so of two instances stopping at once the second sees the first stopped.
"""

from datetime import datetime
from uuid import UUID

from django.db.models import Exists, OuterRef

from agents import events
from agents.models import Event, StackFrame, Suspension, Thread

# An instance works from the moment it is made runnable (queued or claimed) until it waits or
# ends: agents.engine sets and clears runnable_since on its row, the lane's root, exactly so.
_WORKING_LANES = StackFrame.objects.filter(
    thread_id=OuterRef("pk"),
    instance__gt=0,
    status=StackFrame.Status.ACTIVE,
    runnable_since__isnull=False,
)
_PENDING = Suspension.objects.filter(thread_id=OuterRef("pk"), status=Suspension.Status.PENDING)


def settle(thread_id: UUID, now: datetime) -> bool:
    """A frame of the run just stopped working (an instance waits for a decision or for its
    own instances, the main stack waits for its instances, an instance ended): if none works
    any more and a suspension is pending, the run is suspended, with THREAD_SUSPENDED. Returns
    whether it was. A run of an outside agent (external_run_id) has no frame that works and
    keeps its status."""
    n = (
        Thread.objects.filter(
            pk=thread_id,
            status=Thread.Status.RUNNING,
            runnable_since__isnull=True,
            external_run_id="",
        )
        .exclude(lease_expires_at__gt=now)
        .filter(~Exists(_WORKING_LANES), Exists(_PENDING))
        .update(status=Thread.Status.SUSPENDED, updated_at=now)
    )
    if not n:
        return False
    waiting = Suspension.objects.filter(thread_id=thread_id, status=Suspension.Status.PENDING)
    events.record(
        Event.Type.THREAD_SUSPENDED,
        thread_id=thread_id,
        payload={
            "status": Thread.Status.SUSPENDED,
            "suspensions": [
                str(pk) for pk in waiting.order_by("created_at").values_list("pk", flat=True)
            ],
            "reason": "every agent instance of the run waits for a person",
        },
    )
    return True


def lanes_resumed(thread_ids: list[UUID], now: datetime) -> None:
    """Agent instances of these runs work again: a suspended run among them is running again,
    with THREAD_RESUMED. Its main stack still waits for its instances (the last one to finish
    wakes it, agents.instances.wake_parent), so it is not made runnable here."""
    resumed = list(
        Thread.objects.filter(pk__in=set(thread_ids), status=Thread.Status.SUSPENDED)
        .order_by("pk")
        .values_list("pk", flat=True)
    )
    if not resumed:
        return
    Thread.objects.filter(pk__in=resumed).update(
        status=Thread.Status.RUNNING, runnable_since=None, updated_at=now
    )
    events.record_many(
        [
            Event(
                type=Event.Type.THREAD_RESUMED,
                thread_id=pk,
                payload={
                    "status": Thread.Status.RUNNING,
                    "reason": "an agent instance of the run works again",
                },
            )
            for pk in resumed
        ]
    )
