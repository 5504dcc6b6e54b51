"""Webhook subscriptions and the delivery log: one Delivery per event and receiver (a
subscription or an A2A push config), each with its attempts, and the fan-out's cursor."""

import uuid

from django.conf import settings
from django.db import models
from django.db.models import Q

from a2a_server.models import PushNotificationConfig
from agents.delivery import models as delivery
from agents.models import Event
from webhooks.signing import new_secret


class Notice(models.TextChoices):
    """The Event types this app records (agents.models.Event.type holds any string)."""

    CREATED = "WEBHOOK_CREATED"
    CHANGED = "WEBHOOK_CHANGED"
    DELETED = "WEBHOOK_DELETED"
    DISABLED = "WEBHOOK_DISABLED"
    REPLAYED = "WEBHOOK_REPLAYED"


class Subscription(models.Model):
    id = models.UUIDField(primary_key=True, default=uuid.uuid4, editable=False)
    url = models.URLField(max_length=2000)
    secret = models.CharField(
        max_length=200,
        default=new_secret,
        help_text="Standard Webhooks secret (whsec_ and base64); made when empty",
    )
    event_types = models.JSONField(
        default=list, blank=True, help_text="Event types to send; empty: every type"
    )
    agent = models.CharField(
        max_length=100, blank=True, help_text="Only this agent's events; empty: every agent's"
    )
    description = models.CharField(max_length=200, blank=True)
    enabled = models.BooleanField(default=True)
    # Why it was turned off by the gateway (webhooks.outbox.disable_if_failing); empty otherwise.
    disabled_reason = models.CharField(max_length=300, blank=True)
    owner = models.ForeignKey(
        settings.AUTH_USER_MODEL, models.SET_NULL, null=True, blank=True, related_name="+"
    )
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ["created_at", "id"]

    def __str__(self) -> str:
        return self.url

    def wants(self, event_type: str, agent: str | None, created_at: object) -> bool:
        """Does this subscription take an event of this type, from this agent, made then?
        Events from before the subscription existed are not sent to it."""
        return (
            self.enabled
            and (not self.event_types or event_type in self.event_types)
            and (not self.agent or self.agent == agent)
            and created_at >= self.created_at
        )


class Delivery(models.Model):
    """One event for one receiver: retried until it succeeds or the schedule runs out."""

    class Status(models.TextChoices):
        PENDING = "pending"
        SUCCEEDED = "succeeded"
        FAILED = "failed"  # dead-lettered: every attempt of the retry schedule failed

    id = models.BigAutoField(primary_key=True)
    event = models.ForeignKey(Event, models.CASCADE, related_name="+")
    subscription = models.ForeignKey(
        Subscription, models.CASCADE, null=True, blank=True, related_name="deliveries"
    )
    push_config = models.ForeignKey(
        PushNotificationConfig, models.CASCADE, null=True, blank=True, related_name="+"
    )
    # The Standard Webhooks `webhook-id`: one per (event, receiver), the same for every attempt
    # and replay, so a receiver can dedupe on it.
    webhook_id = models.CharField(max_length=100, unique=True)
    status = models.CharField(max_length=10, choices=Status.choices, default=Status.PENDING)
    attempts = models.PositiveIntegerField(default=0)
    # Failed attempts since the delivery was made or last replayed: its place in the schedule.
    retries = models.PositiveIntegerField(default=0)
    next_attempt_at = models.DateTimeField(null=True, blank=True)
    # Who may send it now: the task given this token (when it was enqueued), or anyone once
    # locked_until has passed, so a killed worker or a lost task delays it but never loses it.
    lock_token = models.CharField(max_length=32, blank=True)
    locked_until = models.DateTimeField(null=True, blank=True)
    last_status_code = models.PositiveSmallIntegerField(null=True, blank=True)
    last_response_ms = models.PositiveIntegerField(null=True, blank=True)
    last_error = models.TextField(blank=True)
    finished_at = models.DateTimeField(null=True, blank=True)  # succeeded or dead-lettered
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ["-id"]
        verbose_name_plural = "deliveries"
        constraints = [
            models.UniqueConstraint(
                fields=["event", "subscription"],
                name="delivery_per_subscription",
                condition=Q(subscription__isnull=False),
            ),
            models.UniqueConstraint(
                fields=["event", "push_config"],
                name="delivery_per_push_config",
                condition=Q(push_config__isnull=False),
            ),
            models.CheckConstraint(
                condition=Q(subscription__isnull=True) ^ Q(push_config__isnull=True),
                name="delivery_has_one_receiver",
            ),
        ]
        indexes = [
            # webhooks.outbox.enqueue_due: pending deliveries whose attempt is due.
            models.Index(
                fields=["next_attempt_at"], name="delivery_due_idx", condition=Q(status="pending")
            ),
            # webhooks.outbox.disable_if_failing: a subscription's last finished deliveries.
            models.Index(fields=["subscription", "finished_at"], name="delivery_finished_idx"),
            # Replaying a time range (webhooks.actions.replay_range) and the API's log.
            models.Index(fields=["subscription", "created_at"], name="delivery_created_idx"),
        ]

    def __str__(self) -> str:
        return f"{self.webhook_id} ({self.status})"

    @property
    def receiver_url(self) -> str:
        receiver = self.subscription or self.push_config
        return receiver.url if receiver is not None else ""


class Attempt(delivery.Attempt):
    """One POST of a delivery, as the log shows it."""

    delivery = models.ForeignKey(Delivery, models.CASCADE, related_name="attempt_log")
    status_code = models.PositiveSmallIntegerField(null=True, blank=True)
    response_ms = models.PositiveIntegerField(null=True, blank=True)
    response_body = models.TextField(blank=True)  # its start, for the log


class Cursor(delivery.Cursor):
    """How far the fan-out has read the Event table (webhooks.fanout)."""
