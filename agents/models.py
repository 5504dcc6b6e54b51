"""The engine's rows: agent definitions, threads, stack frames, suspensions and events."""

import uuid

from django.conf import settings
from django.db import models
from django.db.models import Q

from agents.runtime.subagents import AgentSpec


class AgentDefinition(models.Model):
    name = models.SlugField(max_length=100, unique=True)
    description = models.TextField(blank=True)
    model = models.CharField(
        max_length=100, default="scripted", help_text="A Claude model id, or 'scripted'"
    )
    system_prompt = models.TextField(blank=True)
    tools = models.JSONField(default=list, blank=True)
    sub_agents = models.JSONField(default=list, blank=True)
    tool_overrides = models.JSONField(default=dict, blank=True)
    max_iterations = models.PositiveIntegerField(default=10)
    max_tokens = models.PositiveIntegerField(default=4096)
    script = models.JSONField(
        default=list, blank=True, help_text="Scripted model only: the assistant's turns"
    )
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ["name"]

    def __str__(self) -> str:
        return self.name

    def as_spec(self) -> AgentSpec:
        """The definition as the runtime builds frames from it."""
        return AgentSpec(
            name=self.name,
            description=self.description,
            system_prompt=self.system_prompt,
            model=self.model,
            tools=list(self.tools),
            sub_agents=list(self.sub_agents),
            tool_overrides=dict(self.tool_overrides),
            max_iterations=self.max_iterations,
            max_tokens=self.max_tokens,
        )


class Thread(models.Model):
    class Status(models.TextChoices):
        RUNNING = "running"
        SUSPENDED = "suspended"
        WAITING_INPUT = "waiting_input"
        COMPLETED = "completed"
        FAILED = "failed"
        CANCELLED = "cancelled"

    id = models.UUIDField(primary_key=True, default=uuid.uuid4, editable=False)
    agent = models.ForeignKey(AgentDefinition, models.PROTECT, related_name="threads")
    status = models.CharField(max_length=20, choices=Status.choices, default=Status.RUNNING)
    title = models.CharField(max_length=200, blank=True)
    result = models.TextField(blank=True)
    error = models.TextField(blank=True)
    created_by = models.ForeignKey(settings.AUTH_USER_MODEL, models.SET_NULL, null=True, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)
    # When the thread last became runnable: the sweeper re-enqueues a runnable thread that no
    # worker has picked up for STALLED_AFTER_SECONDS (agents.engine.requeue_stalled).
    runnable_since = models.DateTimeField(null=True, blank=True)
    # The worker holding the thread, and until when (invariant 3: one worker at a time).
    lease_owner = models.CharField(max_length=64, blank=True)
    lease_expires_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["-created_at"]
        indexes = [
            # agents.engine.requeue_stalled: runnable threads, oldest first.
            models.Index(
                fields=["runnable_since"],
                name="thread_runnable_idx",
                condition=Q(status="running"),
            ),
        ]

    def __str__(self) -> str:
        return f"{self.agent.name} {self.id}"

    @property
    def finished(self) -> bool:
        return self.status in (self.Status.COMPLETED, self.Status.FAILED, self.Status.CANCELLED)


class StackFrame(models.Model):
    class Type(models.TextChoices):
        MAIN = "main"
        SKILL = "skill"
        AGENT = "agent"

    class Status(models.TextChoices):
        ACTIVE = "active"
        COMPLETED = "completed"
        FAILED = "failed"
        CANCELLED = "cancelled"

    thread = models.ForeignKey(Thread, models.CASCADE, related_name="frames")
    parent = models.ForeignKey(
        "self", models.CASCADE, null=True, blank=True, related_name="children"
    )
    depth = models.PositiveIntegerField(default=0)
    agent_name = models.CharField(max_length=100)
    agent_type = models.CharField(max_length=10, choices=Type.choices, default=Type.MAIN)
    status = models.CharField(max_length=10, choices=Status.choices, default=Status.ACTIVE)
    messages = models.JSONField(default=list)
    system_prompt = models.TextField(blank=True)
    model = models.CharField(max_length=100)
    iteration = models.PositiveIntegerField(default=0)
    max_iterations = models.PositiveIntegerField(default=10)
    max_tokens = models.PositiveIntegerField(default=4096)
    tools = models.JSONField(default=list)
    tool_overrides = models.JSONField(default=dict)
    parent_tool_use_id = models.CharField(max_length=100, blank=True)
    result = models.TextField(blank=True)
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ["thread", "depth", "id"]
        indexes = [models.Index(fields=["thread", "status", "depth"], name="frame_stack_idx")]

    def __str__(self) -> str:
        return f"{self.agent_type}:{self.agent_name} (depth {self.depth})"

    @property
    def label(self) -> str:
        return (
            self.agent_name
            if self.agent_type == self.Type.MAIN
            else f"{self.agent_type}:{self.agent_name}"
        )


class Suspension(models.Model):
    class Kind(models.TextChoices):
        CONFIRMATION = "confirmation"
        INPUT = "input"

    class Status(models.TextChoices):
        PENDING = "pending"
        APPROVED = "approved"
        REJECTED = "rejected"
        TIMED_OUT = "timed_out"
        CANCELLED = "cancelled"

    class OnTimeout(models.TextChoices):
        REJECT = "reject"
        APPROVE = "approve"

    id = models.UUIDField(primary_key=True, default=uuid.uuid4, editable=False)
    thread = models.ForeignKey(Thread, models.CASCADE, related_name="suspensions")
    frame = models.ForeignKey(StackFrame, models.CASCADE, related_name="suspensions")
    group = models.UUIDField(db_index=True)
    agent_name = models.CharField(max_length=100)
    lineage = models.CharField(max_length=500, blank=True)
    tool_use_id = models.CharField(max_length=100)
    tool_name = models.CharField(max_length=100)
    tool_input = models.JSONField(default=dict)
    tool_schema = models.JSONField(default=dict)
    kind = models.CharField(max_length=20, choices=Kind.choices, default=Kind.CONFIRMATION)
    prompt = models.TextField(blank=True, help_text="What the agent said just before the call")
    status = models.CharField(max_length=20, choices=Status.choices, default=Status.PENDING)
    approved = models.BooleanField(null=True)
    reason = models.TextField(blank=True)
    modified_args = models.JSONField(null=True, blank=True)
    response = models.TextField(null=True, blank=True)
    decided_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, models.SET_NULL, null=True, blank=True, related_name="+"
    )
    decided_at = models.DateTimeField(null=True, blank=True)
    timeout = models.PositiveIntegerField(null=True, blank=True)
    expires_at = models.DateTimeField(null=True, blank=True)
    on_timeout = models.CharField(
        max_length=10, choices=OnTimeout.choices, default=OnTimeout.REJECT
    )
    resumed_at = models.DateTimeField(null=True, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["created_at", "id"]
        constraints = [
            models.UniqueConstraint(fields=["frame", "tool_use_id"], name="suspension_per_tool_use")
        ]
        indexes = [
            # The inbox and GET /api/suspensions?status=pending: pending ones, oldest first.
            models.Index(
                fields=["created_at", "id"],
                name="suspension_pending_idx",
                condition=Q(status="pending"),
            ),
            # agents.engine.expire_overdue: pending ones past their deadline.
            models.Index(
                fields=["expires_at"], name="suspension_overdue_idx", condition=Q(status="pending")
            ),
            models.Index(fields=["thread", "created_at"], name="suspension_thread_idx"),
        ]
        permissions = [("decide_suspension", "Can approve, reject or answer suspensions")]

    def __str__(self) -> str:
        return f"{self.tool_name} ({self.status})"

    @property
    def pending(self) -> bool:
        return self.status == self.Status.PENDING

    def outcome(self) -> dict:
        """The recorded decision, as the API reports it."""
        return {
            "status": self.status,
            "approved": self.approved,
            "reason": self.reason,
            "modifiedArgs": self.modified_args,
            "response": self.response,
            "decided_by": self.decided_by.username if self.decided_by else None,
            "decided_at": self.decided_at.isoformat() if self.decided_at else None,
        }


class Event(models.Model):
    """Append-only: the observation log, the audit trail and what the sockets replay."""

    class Type(models.TextChoices):
        THREAD_STARTED = "THREAD_STARTED"
        USER_MESSAGE = "USER_MESSAGE"
        AGENT_MESSAGE = "AGENT_MESSAGE"
        TOOL_CALLED = "TOOL_CALLED"
        TOOL_RESULT = "TOOL_RESULT"
        AGENT_SUSPENDED = "AGENT_SUSPENDED"
        SUSPENSION_DECIDED = "SUSPENSION_DECIDED"
        SUSPENSION_TIMEOUT = "SUSPENSION_TIMEOUT"
        SUSPENSION_CANCELLED = "SUSPENSION_CANCELLED"
        AGENT_RESUMED = "AGENT_RESUMED"
        FRAME_PUSHED = "FRAME_PUSHED"
        FRAME_POPPED = "FRAME_POPPED"
        THREAD_WAITING = "THREAD_WAITING"
        THREAD_COMPLETED = "THREAD_COMPLETED"
        THREAD_FAILED = "THREAD_FAILED"
        THREAD_CANCELLED = "THREAD_CANCELLED"

    id = models.BigAutoField(primary_key=True)
    thread = models.ForeignKey(Thread, models.CASCADE, null=True, blank=True, related_name="events")
    suspension = models.ForeignKey(
        Suspension, models.CASCADE, null=True, blank=True, related_name="events"
    )
    type = models.CharField(max_length=40, choices=Type.choices)
    payload = models.JSONField(default=dict)
    actor = models.ForeignKey(settings.AUTH_USER_MODEL, models.SET_NULL, null=True, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["id"]
        indexes = [models.Index(fields=["thread", "id"], name="event_thread_idx")]

    def __str__(self) -> str:
        return f"#{self.id} {self.type}"

    def as_message(self) -> dict:
        """The shape of design.md's socket message and of GET /api/events."""
        return {
            "id": self.id,
            "type": self.type,
            "thread": str(self.thread_id) if self.thread_id else None,
            "suspension": str(self.suspension_id) if self.suspension_id else None,
            "payload": self.payload,
            "created_at": self.created_at.isoformat(),
        }


class DemoAction(models.Model):
    """What the demo tools did, so a person can see an approved action happen (and a rejected
    one not)."""

    thread = models.ForeignKey(Thread, models.SET_NULL, null=True, blank=True, related_name="+")
    tool = models.CharField(max_length=100)
    arguments = models.JSONField(default=dict)
    summary = models.TextField()
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["-id"]

    def __str__(self) -> str:
        return self.summary
