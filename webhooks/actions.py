"""The changes people make to webhooks: subscribe, change, delete and replay. Each is one
transaction that writes its Event (the audit trail); deliveries are enqueued after commit."""

import uuid
from collections.abc import Iterable
from datetime import datetime
from typing import Any

from django.db import transaction
from django.db.models import QuerySet
from django.utils import timezone

from agents import events
from agents.models import AgentDefinition, Event
from infra import addresses
from infra.addresses import url_error
from webhooks import outbox
from webhooks.models import Delivery, Notice, Subscription
from webhooks.signing import new_secret, secret_error

EDITABLE = ("url", "secret", "event_types", "agent", "description", "enabled")
MAX_EVENT_TYPES = 100


def known_event_types() -> list[str]:
    """What a subscription may ask for: every Event type, the engine's and this app's."""
    return [*Event.Type.values, *Notice.values]


def event_types_error(value: Any) -> str | None:
    if not isinstance(value, list) or not all(isinstance(t, str) for t in value):
        return "A list of event types (empty: every type)."
    if len(value) > MAX_EVENT_TYPES:
        return f"At most {MAX_EVENT_TYPES} types."
    unknown = sorted(set(value) - set(known_event_types()))
    if unknown:
        return f"Unknown event types: {', '.join(unknown[:10])}."
    return None


def agent_error(value: Any) -> str | None:
    if not isinstance(value, str):
        return "An agent's name, or empty for every agent."
    if value and not AgentDefinition.objects.filter(name=value).exists():
        return f"No agent named {value!r}."
    return None


def field_errors(values: dict[str, Any]) -> dict[str, str]:
    """The errors of the given subscription fields, by field (the API's and the admin's)."""
    errors: dict[str, str | None] = {}
    if "url" in values:
        errors["url"] = url_error(values["url"])
    if "secret" in values:
        secret = values["secret"]
        errors["secret"] = (
            "A string." if not isinstance(secret, str) else secret and secret_error(secret)
        )
    if "event_types" in values:
        errors["event_types"] = event_types_error(values["event_types"])
    if "agent" in values:
        errors["agent"] = agent_error(values["agent"])
    if "description" in values:
        d = values["description"]
        errors["description"] = (
            "At most 200 characters." if not isinstance(d, str) or len(d) > 200 else None
        )
    if "enabled" in values and not isinstance(values["enabled"], bool):
        errors["enabled"] = "true or false."
    return {k: v for k, v in errors.items() if v}


def summary(s: Subscription) -> dict[str, Any]:
    """A subscription as its events show it: no secret, and the URL's host alone."""
    return {
        "subscription": str(s.pk),
        "host": addresses.host_of(s.url),
        "event_types": list(s.event_types),
        "agent": s.agent or None,
        "enabled": s.enabled,
    }


def create_subscription(user: Any, values: dict[str, Any]) -> Subscription:
    """A new subscription owned by `user`, from checked values (field_errors)."""
    fields = {k: v for k, v in values.items() if k in EDITABLE}
    if not fields.get("secret"):
        fields["secret"] = new_secret()
    with transaction.atomic():
        s = Subscription.objects.create(owner=user, **fields)
        events.record(Notice.CREATED, actor=user, payload=summary(s))
    return s


def update_subscription(pk: uuid.UUID, user: Any, values: dict[str, Any]) -> Subscription | None:
    """Change a subscription (checked values); None when it is gone. Enabling it again clears
    why it was disabled, and its waiting deliveries go out."""
    with transaction.atomic():
        s = Subscription.objects.select_for_update().filter(pk=pk).first()
        if s is None:
            return None
        changed = []
        for key, value in values.items():
            if key not in EDITABLE:
                continue
            if key == "secret" and not value:
                value = new_secret()
            if getattr(s, key) != value:
                setattr(s, key, value)
                changed.append(key)
        if "enabled" in changed and s.enabled:
            s.disabled_reason = ""
        if changed:
            s.save()
            events.record(
                Notice.CHANGED, actor=user, payload={**summary(s), "changed": sorted(changed)}
            )
    return s


def delete_subscription(pk: uuid.UUID, user: Any) -> bool:
    """Delete a subscription and its delivery log; False when it was already gone."""
    with transaction.atomic():
        s = Subscription.objects.select_for_update().filter(pk=pk).first()
        if s is None:
            return False
        payload = summary(s)
        s.delete()
        events.record(Notice.DELETED, actor=user, payload=payload)
    return True


def replay(
    delivery_ids: Iterable[int],
    user: Any,
    *,
    since: datetime | None = None,
    until: datetime | None = None,
) -> int:
    """Send these deliveries again, now, with the same webhook-id each, and the retry
    schedule from its start. Returns how many; one WEBHOOK_REPLAYED event says who asked."""
    now = timezone.now()
    token = uuid.uuid4().hex
    with transaction.atomic():
        ids = sorted(set(delivery_ids))
        if not ids:
            return 0
        Delivery.objects.filter(pk__in=ids).update(
            status=Delivery.Status.PENDING,
            retries=0,
            next_attempt_at=now,
            finished_at=None,
            lock_token=token,
            locked_until=now + outbox.QUEUED_GRACE,
            updated_at=now,
        )
        subscriptions = sorted(
            str(pk)
            for pk in Delivery.objects.filter(pk__in=ids)
            .exclude(subscription=None)
            .values_list("subscription_id", flat=True)
            .distinct()
        )
        payload: dict[str, Any] = {
            "deliveries": len(ids),
            "subscriptions": subscriptions,
            "first": ids[0],
            "last": ids[-1],
        }
        if since is not None:
            payload["since"] = since.isoformat()
        if until is not None:
            payload["until"] = until.isoformat()
        events.record(Notice.REPLAYED, actor=user, payload=payload)
        transaction.on_commit(lambda: outbox.enqueue(ids, token))
    return len(ids)


def deliveries_between(
    s: Subscription, since: datetime, until: datetime, statuses: list[str]
) -> QuerySet[Delivery]:
    """A subscription's deliveries made in [since, until) with one of these statuses."""
    return Delivery.objects.filter(
        subscription=s, created_at__gte=since, created_at__lt=until, status__in=statuses
    )
