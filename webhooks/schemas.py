"""The shapes of /api/webhooks… for the OpenAPI document (approvals.openapi); they describe
webhooks.api's answers, they do not build them."""

from typing import Any, Literal

from pydantic import Field

from approvals.openapi import Answer, Body, Query
from webhooks.models import Delivery as DeliveryRow

DeliveryStatus = Literal[tuple(DeliveryRow.Status.values)]
Limit = Field(None, ge=1, le=200, description="At most this many (1 to 200; 50 by default).")


class Subscription(Answer):
    id: str
    url: str
    event_types: list[str]
    agent: str | None
    description: str
    enabled: bool
    disabled_reason: str | None
    owner: str | None
    created_at: str
    updated_at: str
    secret: str | None = Field(None, description="On creation, reading one, or changing it.")


class SubscriptionPage(Answer):
    results: list[Subscription]
    next: str | None


class SubscriptionQuery(Query):
    limit: int | None = Limit
    offset: int | None = Field(None, ge=0, le=2**62)


class NewSubscription(Body):
    url: str = Field(
        description="An https URL (a private address only with WEBHOOKS_ALLOW_PRIVATE)."
    )
    event_types: list[str] | None = Field(None, description="Event types; all when left out.")
    agent: str | None = Field(None, description="Only this agent's events.")
    secret: str | None = Field(None, description="A Standard Webhooks secret; made when left out.")
    description: str | None = None
    enabled: bool | None = None


class SubscriptionChange(Body):
    url: str | None = None
    event_types: list[str] | None = None
    agent: str | None = None
    secret: str | None = None
    description: str | None = None
    enabled: bool | None = None


class Delivery(Answer):
    id: int
    webhook_id: str
    event: int | None
    subscription: str | None
    push_config: str | None
    status: DeliveryStatus
    attempts: int
    last_status_code: int | None
    last_error: str | None
    created_at: str
    attempt_log: list[dict[str, Any]] | None = None


class DeliveryPage(Answer):
    results: list[Delivery]
    next: str | None


class DeliveryQuery(Query):
    status: DeliveryStatus | None = None
    before: int | None = Field(None, ge=0, description="Deliveries with a smaller id (`next`).")
    limit: int | None = Limit


class Replay(Body):
    since: str = Field(description="An ISO 8601 date and time.")
    until: str | None = Field(None, description="An ISO 8601 date and time (now by default).")
    status: list[DeliveryStatus] | None = Field(None, description='["failed"] by default.')


class Replayed(Answer):
    replayed: int
