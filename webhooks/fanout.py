"""The webhooks' fan-out: each settled Event becomes a Delivery row for each receiver that
wants it (a subscription, or an A2A push config of the event's thread).

The cursor, the batch's transaction and the nudge are the shared fan-out's
(agents.delivery.fanout); this module says only which events make which deliveries. Runs come
from `nudge` (after each transaction that records events commits, agents.events.committed) and
from beat's sweep every WEBHOOKS_SWEEP_INTERVAL_SECONDS, which catches whatever a nudge missed.
"""

from datetime import datetime
from typing import Any

from django.db.models import Value

from a2a_server import notifications
from a2a_server.models import PushNotificationConfig
from agents.delivery.fanout import FanOut, Known, Nudge
from webhooks import outbox
from webhooks.models import Cursor, Delivery, Subscription

nudges = Nudge("webhooks.tasks.fan_out")
# Whether anything can receive deliveries: read at most once a second per process.
_receivers_known = Known(lambda: receivers_exist())


def nudge(**kwargs: Any) -> None:
    """After a commit that recorded events: have a worker fan them out shortly, when anything
    can receive them (with nobody to deliver to, no task: one per commit, nearly, on a busy
    gateway; the sweep still moves the cursor)."""
    nudges(_receivers_known)


def forget_receivers(**kwargs: Any) -> None:
    """A subscription or push config saved or deleted in this process: read again next time."""
    _receivers_known.forget()


def receivers_exist() -> bool:
    """Is there anything a fan-out could deliver to: an enabled subscription or an A2A push
    config? (One statement, made at most once a second per process: `_receivers_known`.)"""
    subscriptions = Subscription.objects.filter(enabled=True)
    return (
        PushNotificationConfig.objects.annotate(any=Value(1))
        .values("any")
        .union(subscriptions.annotate(any=Value(1)).values("any"), all=True)
        .exists()
    )


def deliveries_for(rows: list[dict[str, Any]], now: datetime, token: str) -> list[Delivery]:
    """The Delivery rows for these events: one per enabled subscription that wants the event,
    and one per A2A push config of the event's thread when the event changes the task's
    state."""
    subscriptions = list(Subscription.objects.filter(enabled=True))
    threads = {r["thread_id"] for r in rows if r["thread_id"] and notifications.pushed(r["type"])}
    configs: dict[Any, list[PushNotificationConfig]] = {}
    if threads:
        for config in PushNotificationConfig.objects.filter(thread_id__in=threads):
            configs.setdefault(config.thread_id, []).append(config)
    made = []
    common = {
        "next_attempt_at": now,
        "lock_token": token,
        "locked_until": now + outbox.QUEUED_GRACE,
    }
    for r in rows:
        for s in subscriptions:
            if s.wants(r["type"], r["thread__agent__name"], r["created_at"]):
                made.append(
                    Delivery(
                        event_id=r["id"],
                        subscription=s,
                        webhook_id=f"msg_{r['id']}_{s.id.hex}",
                        **common,
                    )
                )
        if notifications.pushed(r["type"]):
            for c in configs.get(r["thread_id"], []):
                made.append(
                    Delivery(
                        event_id=r["id"],
                        push_config=c,
                        webhook_id=f"a2a_{r['id']}_{c.id.hex}",
                        **common,
                    )
                )
    return made


fanning = FanOut(
    cursor=Cursor,
    model=Delivery,
    fields=("thread_id", "thread__agent__name"),
    make=deliveries_for,
    enqueue=outbox.enqueue,
)
fan_out = fanning.step
fan_out_all = fanning.all
