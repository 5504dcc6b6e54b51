"""Who wants email, how far the Event table has been read for it, each email to send and its
attempts."""

from django.conf import settings
from django.db import models
from django.db.models import Q

from agents.delivery import models as delivery
from agents.models import AgentDefinition, Event, Thread


class EmailOptIn(models.Model):
    """A reviewer asks for an email about each new request of one agent, or (no agent) of
    every agent. Reminders go to the same people; escalations go to the group named."""

    user = models.ForeignKey(settings.AUTH_USER_MODEL, models.CASCADE, related_name="email_opt_ins")
    agent = models.ForeignKey(
        AgentDefinition, models.CASCADE, null=True, blank=True, related_name="+"
    )
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["user", "agent"]
        constraints = [
            models.UniqueConstraint(fields=["user", "agent"], name="opt_in_per_agent"),
            models.UniqueConstraint(
                fields=["user"], condition=Q(agent__isnull=True), name="opt_in_every_agent"
            ),
        ]

    def __str__(self) -> str:
        return f"{self.user} ← {self.agent or 'every agent'}"


class Cursor(delivery.Cursor):
    """How far notify.outbox's fan-out has read the Event table (one row)."""


class Email(models.Model):
    """One email to one person about one group of suspensions; made once per event that calls
    for it (its key), sent by a task (agents.delivery.outbox), marked sent in the database."""

    class Kind(models.TextChoices):
        REQUEST = "request"
        REMINDER = "reminder"
        ESCALATION = "escalation"

    class Status(models.TextChoices):
        PENDING = "pending"
        SENT = "sent"
        SKIPPED = "skipped"  # every request in it was decided before it went
        FAILED = "failed"  # refused for good (a 5xx reply), or every time

    # What it is about, the same for every recipient: "request:<group>",
    # "reminder:<group>:<n>", "escalation:<group>:<group name>".
    key = models.CharField(max_length=250)
    to = models.EmailField()
    user = models.ForeignKey(
        settings.AUTH_USER_MODEL, models.SET_NULL, null=True, blank=True, related_name="+"
    )
    kind = models.CharField(max_length=20, choices=Kind.choices)
    thread = models.ForeignKey(Thread, models.CASCADE, related_name="+")
    group = models.UUIDField()
    event = models.ForeignKey(Event, models.SET_NULL, null=True, blank=True, related_name="+")
    subject = models.CharField(max_length=300)
    body = models.TextField()
    status = models.CharField(max_length=10, choices=Status.choices, default=Status.PENDING)
    attempts = models.PositiveSmallIntegerField(default=0)
    # The earliest the next attempt may be made (a failed attempt waits before the next).
    next_attempt_at = models.DateTimeField(null=True, blank=True)
    # Who may send it now: the task given this token, or anyone once locked_until has passed,
    # so a sender killed mid-send, or a lost task, delays it but never loses it.
    lock_token = models.CharField(max_length=32, blank=True)
    locked_until = models.DateTimeField(null=True, blank=True)
    last_error = models.TextField(blank=True)
    created_at = models.DateTimeField(auto_now_add=True)
    finished_at = models.DateTimeField(null=True, blank=True)  # sent, or failed for good

    class Meta:
        ordering = ["-created_at", "-id"]
        constraints = [models.UniqueConstraint(fields=["key", "to"], name="email_per_recipient")]
        indexes = [
            # notify.outbox.enqueue_due: unsent emails whose next attempt is due.
            models.Index(
                fields=["next_attempt_at"], name="email_unsent_idx", condition=Q(status="pending")
            )
        ]

    def __str__(self) -> str:
        return f"{self.kind} to {self.to} ({self.status})"


class EmailAttempt(delivery.Attempt):
    """One handing of an email to the SMTP server, as the log shows it."""

    email = models.ForeignKey(Email, models.CASCADE, related_name="attempt_log")
