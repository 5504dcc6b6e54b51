"""Reviewers' devices, the server's VAPID key, and the pushes to send with their attempts."""

from django.conf import settings
from django.db import models
from django.db.models import Q

from agents.delivery import models as delivery
from agents.models import Event


class Device(models.Model):
    """One browser on one device where a reviewer turned notifications on: its push
    subscription (the push service's endpoint and the keys the payload is encrypted to)."""

    user = models.ForeignKey(settings.AUTH_USER_MODEL, models.CASCADE, related_name="devices")
    # A capability URL at the browser's push service (webpush.devices.check_endpoint).
    endpoint = models.URLField(max_length=1000, unique=True)
    # The subscription's P-256 public key and auth secret, base64url as the browser gives them.
    p256dh = models.CharField(max_length=100)
    auth = models.CharField(max_length=50)
    name = models.CharField(max_length=100)
    created_at = models.DateTimeField(auto_now_add=True)
    last_push_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["created_at", "id"]

    def __str__(self) -> str:
        return f"{self.name} of {self.user}"


class VapidKey(models.Model):
    """The server's VAPID key (RFC 8292), made once when WEBPUSH_VAPID_PRIVATE_KEY is not set
    and kept: every subscription is bound to it, so every machine of a deployment must sign
    with the same one. In the database (one row), the private half sealed under SECRET_KEY,
    as agents.models.ReceiptKey is."""

    private_sealed = models.TextField()
    created_at = models.DateTimeField(auto_now_add=True)

    def __str__(self) -> str:
        return f"VAPID key of {self.created_at:%Y-%m-%d}"


class PushCursor(delivery.Cursor):
    """How far webpush.fanout has read the Event table (one row)."""


class Push(models.Model):
    """One push to one device about one group of suspensions: a request, a reminder or an
    escalation shown, or (closed) its notification taken away once nothing in it waits.
    Made once per device and key, sent by a task (agents.delivery.outbox)."""

    class Kind(models.TextChoices):
        REQUEST = "request"
        REMINDER = "reminder"
        ESCALATION = "escalation"
        CLOSED = "closed"

    class Status(models.TextChoices):
        PENDING = "pending"
        SUCCEEDED = "succeeded"
        SKIPPED = "skipped"  # nothing waited any more when it was due, or nothing to close
        FAILED = "failed"

    device = models.ForeignKey(Device, models.CASCADE, related_name="pushes")
    # What it is about, as notify.routing names it ("request:<group>", ...; "closed:<group>").
    key = models.CharField(max_length=250)
    kind = models.CharField(max_length=20, choices=Kind.choices)
    group = models.UUIDField()
    event = models.ForeignKey(Event, models.SET_NULL, null=True, blank=True, related_name="+")
    # What the service worker is sent (webpush.messages): no tool arguments.
    payload = models.JSONField()
    status = models.CharField(max_length=10, choices=Status.choices, default=Status.PENDING)
    attempts = models.PositiveSmallIntegerField(default=0)
    next_attempt_at = models.DateTimeField(null=True, blank=True)
    lock_token = models.CharField(max_length=32, blank=True)
    locked_until = models.DateTimeField(null=True, blank=True)
    last_error = models.TextField(blank=True)
    created_at = models.DateTimeField(auto_now_add=True)
    finished_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["-created_at", "-id"]
        constraints = [models.UniqueConstraint(fields=["key", "device"], name="push_per_device")]
        indexes = [
            # webpush.outbox's enqueue_due: pushes not sent whose next attempt is due.
            models.Index(
                fields=["next_attempt_at"], name="push_unsent_idx", condition=Q(status="pending")
            ),
            # webpush.fanout: the devices a group's notification was shown on.
            models.Index(fields=["group"], name="push_group_idx"),
        ]

    def __str__(self) -> str:
        return f"{self.kind} to {self.device_id} ({self.status})"


class PushAttempt(delivery.Attempt):
    """One POST to the push service, as the log shows it."""

    push = models.ForeignKey(Push, models.CASCADE, related_name="attempt_log")
    status_code = models.PositiveSmallIntegerField(null=True, blank=True)
    response_ms = models.PositiveIntegerField(null=True, blank=True)
