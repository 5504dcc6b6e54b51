"""A task's push notification configs (A2A's TaskPushNotificationConfig): checked, stored per
task, listed, deleted. The webhooks app delivers to them (webhooks.fanout); a URL is checked as
a webhook's is (infra.addresses.url_error: http(s), and public addresses only unless
WEBHOOKS_ALLOW_PRIVATE), and checked again at each delivery.

Each change is one transaction with its Event, of a type of this module's own (Notice), as the
webhooks app records its subscriptions: the audit trail says who pointed a task's updates
where. The token and credentials stay out of it.
"""

import uuid
from typing import Any

from a2a.types import (
    AuthenticationInfo,
    ListTaskPushNotificationConfigsResponse,
    TaskNotFoundError,
    TaskPushNotificationConfig,
)
from django.db import models, transaction
from django.db.models import Q

from a2a_server.access import CANCEL, VIEW, Denied, find_thread, invalid, require, see
from a2a_server.models import PushNotificationConfig
from a2a_server.reads import MAX_PAGE_SIZE, PAGE_SIZE, decode_token, encode_token
from agents import events
from agents.models import Thread
from infra.addresses import url_error

MAX_CONFIG_ID = 200
MAX_TOKEN = 500
MAX_SCHEME = 100
MAX_CREDENTIALS = 2000


class Notice(models.TextChoices):
    """The Event types this module records (agents.models.Event.type holds any string)."""

    SET = "A2A_PUSH_CONFIG_SET"
    DELETED = "A2A_PUSH_CONFIG_DELETED"


def checked(config: TaskPushNotificationConfig, where: str) -> dict[str, Any]:
    """A push config's columns, checked; `where` names its field in the request."""
    if error := url_error(config.url):
        raise invalid(error, f"{where}.url")
    if len(config.id) > MAX_CONFIG_ID:
        raise invalid(f"At most {MAX_CONFIG_ID} characters.", f"{where}.id")
    if len(config.token) > MAX_TOKEN:
        raise invalid(f"At most {MAX_TOKEN} characters.", f"{where}.token")
    authentication = None
    if config.HasField("authentication"):
        scheme = config.authentication.scheme
        if not scheme or len(scheme) > MAX_SCHEME or " " in scheme:
            raise invalid(
                "An HTTP authentication scheme, such as Bearer.", f"{where}.authentication.scheme"
            )
        if len(config.authentication.credentials) > MAX_CREDENTIALS:
            raise invalid(
                f"At most {MAX_CREDENTIALS} characters.", f"{where}.authentication.credentials"
            )
        authentication = {"scheme": scheme, "credentials": config.authentication.credentials}
    return {
        "config_id": config.id or uuid.uuid4().hex,
        "url": config.url,
        "token": config.token,
        "authentication": authentication,
    }


def _audit(row: PushNotificationConfig) -> dict[str, Any]:
    scheme = (row.authentication or {}).get("scheme")
    return {"config": row.config_id, "url": row.url, "authentication": scheme or None}


def store(user: Any, thread: Thread, fields: dict[str, Any]) -> PushNotificationConfig:
    """Create the config, or replace the task's config of the same id."""
    fields = dict(fields)
    config_id = fields.pop("config_id")
    with transaction.atomic():
        row, _ = PushNotificationConfig.objects.update_or_create(
            thread=thread,
            config_id=config_id,
            defaults=fields,
            create_defaults={**fields, "created_by": user},
        )
        events.record(Notice.SET, thread_id=thread.pk, actor=user, payload=_audit(row))
    return row


def as_proto(row: PushNotificationConfig) -> TaskPushNotificationConfig:
    config = TaskPushNotificationConfig(
        id=row.config_id, task_id=str(row.thread_id), url=row.url, token=row.token
    )
    if row.authentication:
        config.authentication.CopyFrom(
            AuthenticationInfo(
                scheme=row.authentication.get("scheme", ""),
                credentials=row.authentication.get("credentials", ""),
            )
        )
    return config


def create(user: Any, config: TaskPushNotificationConfig) -> TaskPushNotificationConfig:
    require(user, VIEW, "see tasks")
    thread = find_thread(config.task_id)
    see(user, thread)
    return as_proto(store(user, thread, checked(config, "params")))


def get(user: Any, task_id: str, config_id: str) -> TaskPushNotificationConfig:
    require(user, VIEW, "see tasks")
    thread = find_thread(task_id)
    see(user, thread)
    row = thread.push_configs.filter(config_id=config_id).first()
    if row is None:
        raise TaskNotFoundError(
            f"The task has no push notification config {config_id[:100]!r}.",
            data={"taskId": str(thread.pk), "configId": config_id[:100]},
        )
    return as_proto(row)


def list_configs(
    user: Any, task_id: str, page_size: int, page_token: str
) -> ListTaskPushNotificationConfigsResponse:
    """A task's configs, oldest first, a page at a time (a keyset token)."""
    require(user, VIEW, "see tasks")
    thread = find_thread(task_id)
    see(user, thread)
    size = page_size or PAGE_SIZE
    if not 1 <= size <= MAX_PAGE_SIZE:
        raise invalid(f"From 1 to {MAX_PAGE_SIZE}.", "pageSize")
    rows = thread.push_configs.order_by("created_at", "id")
    if page_token:
        created, pk = decode_token(page_token, "pageToken")
        rows = rows.filter(Q(created_at__gt=created) | Q(created_at=created, pk__gt=pk))
    page = list(rows[: size + 1])
    more = len(page) > size
    page = page[:size]
    response = ListTaskPushNotificationConfigsResponse(
        next_page_token=encode_token(page[-1].created_at, page[-1].pk) if more else ""
    )
    response.configs.extend(as_proto(row) for row in page)
    return response


def delete(user: Any, task_id: str, config_id: str) -> None:
    """Idempotent: a config already gone is fine. Only its creator, or someone who may cancel
    tasks, deletes a config."""
    require(user, VIEW, "see tasks")
    thread = find_thread(task_id)
    see(user, thread)
    # Locked first, then deleted with its deliveries (webhooks) in the same transaction: a
    # delivery the fan-out adds meanwhile waits for the lock instead of being left behind.
    with transaction.atomic():
        row = thread.push_configs.select_for_update().filter(config_id=config_id).first()
        if row is None:
            return
        if row.created_by_id != user.pk and not user.has_perm(CANCEL):
            raise Denied(403, "Only its creator, or someone who may cancel tasks, deletes it.")
        audit = _audit(row)
        row.delete()
        events.record(Notice.DELETED, thread_id=thread.pk, actor=user, payload=audit)
