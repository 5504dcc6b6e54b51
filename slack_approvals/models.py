"""Slack's rows: where an agent's requests go (SlackRoute), which Slack user is which gateway
user (SlackLink) and the reviewers' requests to be linked (SlackLinkRequest), the messages
posted (SlackMessage), and the delivery log of every post and update with its attempts, read
from the Event table after a cursor of this app's own."""

from django.conf import settings
from django.db import models
from django.db.models import Q

from agents.delivery import models as delivery
from agents.models import Event, Suspension


class SlackRoute(models.Model):
    """An agent file's `slack:` for one agent (or MCP server): a channel, people to message
    directly, or both; and its tools' own, under tool_overrides."""

    agent = models.CharField(max_length=100, primary_key=True)
    channel = models.CharField(max_length=100, blank=True)
    # Gateway user names or group names; each user with a SlackLink gets a direct message.
    dm = models.JSONField(default=list, blank=True)
    # Per tool, in place of the agent's: {tool: {"channel": ..., "dm": [...]}} (tool_overrides).
    tools = models.JSONField(default=dict, blank=True)
    source = models.CharField(max_length=500, blank=True)  # the agent file that said it
    updated_at = models.DateTimeField(auto_now=True)

    def __str__(self) -> str:
        return f"{self.agent} → Slack"


class SlackLink(models.Model):
    """A gateway user and their Slack account: a click by that Slack user acts as this user."""

    user = models.OneToOneField(settings.AUTH_USER_MODEL, models.CASCADE, related_name="slack")
    slack_user_id = models.CharField(max_length=50, unique=True)
    linked_at = models.DateTimeField(auto_now_add=True)

    def __str__(self) -> str:
        return f"{self.user} = {self.slack_user_id}"


class SlackLinkRequest(models.Model):
    """A reviewer's "Connect Slack" step waiting for the Slack side: the direct message sent to
    `slack_user_id` carries a one-time token whose SHA-256 alone is kept here; its button,
    clicked by that Slack user before `expires_at`, links them (slack_approvals.connect)."""

    user = models.ForeignKey(settings.AUTH_USER_MODEL, models.CASCADE, related_name="+")
    slack_user_id = models.CharField(max_length=50)
    token_hash = models.CharField(max_length=64, unique=True)
    expires_at = models.DateTimeField()
    used_at = models.DateTimeField(null=True, blank=True)
    # The direct message Slack answered with, updated once the link is made.
    channel = models.CharField(max_length=100, blank=True)
    ts = models.CharField(max_length=50, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)

    def __str__(self) -> str:
        return f"{self.user} → {self.slack_user_id}?"


class SlackMessage(models.Model):
    """One message posted about a request, in one channel or direct conversation; updated in
    place as the request is decided."""

    suspension = models.ForeignKey(Suspension, models.CASCADE, related_name="+")
    channel = models.CharField(max_length=100)  # the conversation id Slack answered with
    ts = models.CharField(max_length=50)  # the message's id in that conversation
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        constraints = [
            models.UniqueConstraint(
                fields=["suspension", "channel"], name="slack_message_per_conversation"
            )
        ]

    def __str__(self) -> str:
        return f"{self.channel}/{self.ts}"


class SlackDelivery(models.Model):
    """One event sent to one place in Slack: a new request posted, or its message updated.
    Retried until it succeeds, fails for good, or the schedule
    (slack_approvals.outbox.RETRY_SCHEDULE) runs out."""

    class Action(models.TextChoices):
        POST = "post"  # chat.postMessage, once per request and place
        UPDATE = "update"  # chat.update of the messages already posted
        REPLY = "reply"  # a reminder or an escalation, in each message's thread

    class Status(models.TextChoices):
        PENDING = "pending"
        SUCCEEDED = "succeeded"
        FAILED = "failed"  # every attempt of the schedule failed

    id = models.BigAutoField(primary_key=True)
    event = models.ForeignKey(Event, models.CASCADE, related_name="+")
    suspension = models.ForeignKey(Suspension, models.CASCADE, related_name="+")
    action = models.CharField(max_length=10, choices=Action.choices)
    # Where: a channel id, or a gateway user name to message directly ("" for an update,
    # which goes to every message of the request).
    channel = models.CharField(max_length=100, blank=True)
    dm_user = models.CharField(max_length=150, blank=True)
    status = models.CharField(max_length=10, choices=Status.choices, default=Status.PENDING)
    attempts = models.PositiveIntegerField(default=0)
    next_attempt_at = models.DateTimeField(null=True, blank=True)
    # Who may send it now: the task given this token, or anyone once locked_until has passed
    # (agents.delivery.outbox), so a killed worker or a lost task delays it but never loses it.
    lock_token = models.CharField(max_length=32, blank=True)
    locked_until = models.DateTimeField(null=True, blank=True)
    last_error = models.TextField(blank=True)
    finished_at = models.DateTimeField(null=True, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)
    # A reply's conversations answered so far: an attempt after a failure skips them.
    replied_in = models.JSONField(default=list, blank=True)

    class Meta:
        ordering = ["-id"]
        verbose_name_plural = "Slack deliveries"
        indexes = [
            # slack_approvals.outbox.enqueue_due: pending deliveries whose attempt is due.
            models.Index(
                fields=["next_attempt_at"],
                name="slack_delivery_due_idx",
                condition=Q(status="pending"),
            ),
        ]

    def __str__(self) -> str:
        return f"{self.action} {self.suspension_id} ({self.status})"


class SlackAttempt(delivery.Attempt):
    """One call to Slack's Web API for a delivery, as the log shows it."""

    delivery = models.ForeignKey(SlackDelivery, models.CASCADE, related_name="attempt_log")
    status_code = models.PositiveSmallIntegerField(null=True, blank=True)


class SlackCursor(delivery.Cursor):
    """How far the fan-out (slack_approvals.fanout) has read the Event table."""


class SlackClick(models.Model):
    """A click already acted on, by its Slack trigger id: Slack sends a click again when it
    thinks the gateway missed it (X-Slack-Retry-Num), and a retry never decides twice
    (slack_approvals.clicks). Written in the decision's transaction."""

    trigger_id = models.CharField(max_length=200, primary_key=True)
    created_at = models.DateTimeField(auto_now_add=True)

    def __str__(self) -> str:
        return self.trigger_id
