"""Web Push's fan-out: requests, reminders and escalations, read from the Event table, become
pushes to the devices of the people email reaches (notify.routing, the same decisions), and a
group's decision becomes a push that takes its notification away.

The cursor, the batch's transaction and the nudge are the shared fan-out's
(agents.delivery.fanout); runs come from `nudge` (after a commit that recorded such an event,
while any device is kept) and from beat's sweep (webpush.tasks.sweep). A device needs no email
address: its reviewer is routed as email routes them, address or not.

A closing push goes to the devices the group's notice was pushed to, once nothing in the group
waits for a person (every call decided, timed out, cancelled or ignored).
"""

from datetime import datetime
from typing import Any
from uuid import UUID

from agents.delivery.fanout import FanOut, Known, Nudge
from agents.models import Event, Suspension
from notify import routing
from webpush import messages, outbox
from webpush.models import Device, Push, PushCursor

SHOWN = set(routing.KINDS)
CLOSING = {
    Event.Type.SUSPENSION_DECIDED,
    Event.Type.SUSPENSION_TIMEOUT,
    Event.Type.SUSPENSION_CANCELLED,
    Event.Type.SUSPENSION_IGNORED,
}

nudges = Nudge("webpush.tasks.fan_out")
# Whether any device is kept: read at most once a second per process, not at every commit
# (forgotten when a device is saved or deleted here: webpush.apps).
devices_known = Known(lambda: Device.objects.exists())


def nudge(events: list[Event] | None = None, **kwargs: Any) -> None:
    """After a commit: have a worker fan out shortly, when the commit recorded an event that
    makes pushes and some device is kept."""
    if events is not None and not any(e.type in SHOWN or e.type in CLOSING for e in events):
        return
    nudges(wanted=devices_known)


def pushes_for(rows: list[dict[str, Any]], now: datetime, token: str = "") -> list[Push]:
    """The pushes these events make (agents.delivery.fanout's `make`)."""
    if not Device.objects.exists():
        return []
    kinds = SHOWN | CLOSING
    if not routing.anyone_opted_in():
        kinds = kinds - {Event.Type.AGENT_SUSPENDED}  # it reaches nobody (notify.routing)
    wanted = [r["id"] for r in rows if r["type"] in kinds and r["suspension_id"]]
    if not wanted:
        return []
    made: list[Push] = []
    keys: set[str] = set()
    pushed: dict[UUID, set[int]] = {}  # the devices each group's notice goes to, this batch
    for event in Event.objects.filter(id__in=wanted).select_related("suspension").order_by("id"):
        if event.type in CLOSING:
            made.extend(_closing(event, now, keys, pushed))
        else:
            made.extend(_showing(event, now, keys, pushed))
    return made


def _showing(event: Event, now: datetime, keys: set[str], pushed: dict[UUID, set[int]]) -> list:
    s = event.suspension
    route = routing.route(event, addressed=False)
    if route.key in keys or Push.objects.filter(key=route.key).exists():
        return []  # another call of the group (in this batch or an earlier one) made it
    keys.add(route.key)
    people = [user.pk for user, _ in route.people()]
    devices = list(Device.objects.filter(user_id__in=people).values_list("pk", flat=True))
    if not devices:
        return []
    group = list(Suspension.objects.filter(group=s.group).order_by("created_at", "id"))
    payload = messages.shown_push(route.kind, group, now)
    pushed.setdefault(s.group, set()).update(devices)
    return [
        Push(
            device_id=pk,
            key=route.key,
            kind=route.kind,
            group=s.group,
            event=event,
            payload=payload,
            next_attempt_at=now,
        )
        for pk in devices
    ]


def _closing(event: Event, now: datetime, keys: set[str], pushed: dict[UUID, set[int]]) -> list:
    group = event.suspension.group
    key = f"closed:{group}"
    if key in keys:
        return []
    earlier = Push.objects.filter(group=group).exclude(kind=Push.Kind.CLOSED)
    devices = set(earlier.values_list("device_id", flat=True)) | pushed.get(group, set())
    if not devices or Push.objects.filter(key=key).exists():
        return []
    waiting = Suspension.objects.filter(
        group=group, status=Suspension.Status.PENDING, ignored_at__isnull=True
    )
    if waiting.exists():
        return []  # a call of the group still waits: its notification stays
    keys.add(key)
    payload = messages.closed_push(group)
    return [
        Push(
            device_id=pk,
            key=key,
            kind=Push.Kind.CLOSED,
            group=group,
            event=event,
            payload=payload,
            next_attempt_at=now,
        )
        for pk in sorted(devices)
    ]


fanning = FanOut(
    cursor=PushCursor,
    model=Push,
    fields=("suspension_id",),
    make=pushes_for,
    enqueue=outbox.enqueue,
    name="webpush",
)
fan_out = fanning.step
fan_out_all = fanning.all
