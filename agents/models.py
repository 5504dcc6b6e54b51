"""The engine's rows: agent definitions, threads, stack frames, suspensions and events."""

import uuid
from typing import Any

from django.conf import settings
from django.db import models
from django.db.models import Q
from django.utils import timezone

from agents.runtime.ladder import Ladder, build_ladder
from agents.runtime.subagents import AgentSpec
from agents.runtime.tools import Tool, registry


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
    # Agents offered to this one as tools `agent__<name>`: each call runs a child instance of
    # its own, concurrently with its siblings (agents.runtime.agent_tools).
    agents_as_tools = models.JSONField(default=list, blank=True)
    # Scripted model only: its text reaches the thread page in chunks, as a real model's does.
    stream = models.BooleanField(default=False)
    # Input rules for the replies a person gives when the agent waits for input (None / empty:
    # the global settings INPUT_MAX_CHARS, INPUT_TYPES, INPUT_TIMEOUT_SECONDS).
    input_max_chars = models.PositiveIntegerField(null=True, blank=True)
    input_types = models.JSONField(default=list, blank=True)  # "text/plain", "application/json"
    input_timeout = models.PositiveIntegerField(null=True, blank=True)  # seconds; 0: never
    on_input_timeout = models.CharField(
        max_length=10,
        choices=[("cancel", "cancel the thread"), ("continue", "tell the agent and go on")],
        default="cancel",
    )
    # Reminders and escalation for this agent's requests (agents.runtime.ladder), unless the
    # tool sets its own: reminder times in seconds before the deadline, earliest first; the
    # group to escalate to; and when, as written ("2": the 2nd reminder; "5m": a duration).
    reminders = models.JSONField(default=list, blank=True)
    escalate_to = models.CharField(max_length=150, blank=True)
    escalate_at = models.CharField(max_length=20, blank=True)
    # Who may decide this agent's requests, and how (agents.policy): groups, four_eyes, quorum,
    # auto_approve / auto_reject rules; "tools": {name: the same keys} for one tool.
    policy = models.JSONField(default=dict, blank=True)
    # Grows each time the definition changes (agents.versions): a suspension remembers the
    # version it was made under, and AgentVersion keeps every one.
    version = models.PositiveIntegerField(default=1)
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
            agents_as_tools=list(self.agents_as_tools),
        )

    def ladder(self) -> Ladder:
        """The agent's reminders and escalation, for tools that set none of their own."""
        return build_ladder(self.reminders or None, self.escalate_to, self.escalate_at)


class AgentVersion(models.Model):
    """One version of an agent definition, kept when the file changes (never overwritten)."""

    agent = models.ForeignKey(AgentDefinition, models.CASCADE, related_name="versions")
    version = models.PositiveIntegerField()
    # The definition as loaded (agents.versions.snapshot) and its SHA-256.
    definition = models.JSONField(default=dict)
    digest = models.CharField(max_length=64)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["agent", "-version"]
        constraints = [
            models.UniqueConstraint(fields=["agent", "version"], name="agent_version_unique")
        ]

    def __str__(self) -> str:
        return f"{self.agent_id} v{self.version}"


class Thread(models.Model):
    # What agents.starting.start_thread wrote (the first frame and THREAD_STARTED), on the
    # instance it returns so an answer need not read them back: not a column.
    started: tuple[Any, Any]

    class Status(models.TextChoices):
        RUNNING = "running"
        SUSPENDED = "suspended"
        WAITING_INPUT = "waiting_input"
        # Cancelled while a tool runs: the worker running it records its result, then the
        # cancel unwinds the stack (agents.cancelling).
        CANCELLING = "cancelling"
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
    # Kept when the user is deleted: the trail still says who started the run.
    created_by_name = models.CharField(max_length=150, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)
    # How often the sweeper has enqueued the thread again since a worker last took it: each
    # re-enqueue waits twice as long, so a long queue is not flooded with duplicates
    # (agents.deadlines.requeue_stalled).
    requeues = models.PositiveIntegerField(default=0)
    # When the thread last became runnable: the sweeper re-enqueues a runnable thread that no
    # worker has picked up for STALLED_AFTER_SECONDS (agents.deadlines.requeue_stalled).
    runnable_since = models.DateTimeField(null=True, blank=True)
    # The worker holding the thread, and until when (invariant 3: one worker at a time).
    lease_owner = models.CharField(max_length=64, blank=True)
    lease_expires_at = models.DateTimeField(null=True, blank=True)
    # The tool the lease holder runs on the main stack, set as it starts and cleared at the
    # checkpoint after it: a cancel meanwhile waits for its result (agents.cancelling).
    running_tool = models.CharField(max_length=200, blank=True, default="", db_default="")
    # Waiting for input: what was asked, and when the wait ends (the agent's input timeout).
    input_prompt = models.TextField(blank=True)
    input_expires_at = models.DateTimeField(null=True, blank=True)
    # A run of an agent that works outside the gateway (agents.external): the run id it gave,
    # empty for the gateway's own runs. Such a thread has one frame with nothing to resume and
    # stays running with no runnable_since, so no worker ever takes it: its decisions are
    # read by the outside agent (POST/GET /api/requests), not resumed here.
    external_run_id = models.CharField(max_length=200, blank=True)

    class Meta:
        ordering = ["-created_at"]
        constraints = [
            # agents.external.raise_request: one thread per outside run of a caller's agent,
            # even when two requests of a new run arrive at once.
            models.UniqueConstraint(
                fields=["agent", "created_by", "external_run_id"],
                name="external_run_per_caller",
                condition=~Q(external_run_id=""),
            )
        ]
        indexes = [
            # agents.deadlines.requeue_stalled: runnable threads, oldest first.
            models.Index(
                fields=["runnable_since"],
                name="thread_runnable_idx",
                condition=Q(status="running"),
            ),
            # agents.replies.expire_inputs: threads whose wait for input has run out.
            models.Index(
                fields=["input_expires_at"],
                name="thread_input_due_idx",
                condition=Q(status="waiting_input"),
            ),
            # agents.cancelling.settle_abandoned: cancels whose tool's worker stopped.
            models.Index(
                fields=["lease_expires_at"],
                name="thread_cancelling_idx",
                condition=Q(status="cancelling"),
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
    # Agents as tools. An instance is the child frame one `agent__<name>` call starts: its
    # number within its batch (1..N in call order), 0 for every other frame. An instance and
    # the sub-agents it pushes form a lane, run by one worker at a time under the instance's
    # own lease, beside the thread's main stack (whose lease is the thread's). `lane` is the
    # instance every frame of a lane belongs to (the instance itself included); None on the
    # main stack.
    instance = models.PositiveIntegerField(default=0)
    lane = models.ForeignKey(
        "self", models.CASCADE, null=True, blank=True, related_name="lane_frames"
    )
    runnable_since = models.DateTimeField(null=True, blank=True)
    requeues = models.PositiveIntegerField(default=0)
    lease_owner = models.CharField(max_length=64, blank=True)
    lease_expires_at = models.DateTimeField(null=True, blank=True)
    # An instance's Thread.running_tool: the tool its lane's lease holder runs.
    running_tool = models.CharField(max_length=200, blank=True, default="", db_default="")
    # The model's token usage in this frame, as the provider reported it.
    input_tokens = models.PositiveBigIntegerField(default=0)
    output_tokens = models.PositiveBigIntegerField(default=0)
    # The tools this frame called, in order (an instance's line on the thread page).
    tools_used = models.JSONField(default=list, blank=True)
    finished_at = models.DateTimeField(null=True, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ["thread", "depth", "id"]
        indexes = [
            models.Index(fields=["thread", "status", "depth"], name="frame_stack_idx"),
            # agents.deadlines.requeue_stalled: runnable instances, oldest first.
            models.Index(
                fields=["runnable_since"],
                name="frame_runnable_idx",
                condition=Q(status="active", instance__gt=0),
            ),
        ]
        constraints = [
            # One instance per agent-tool call: a repeated fan-out finds it made.
            models.UniqueConstraint(
                fields=["parent", "parent_tool_use_id"],
                name="instance_per_tool_use",
                condition=Q(instance__gt=0),
            )
        ]

    def __str__(self) -> str:
        return f"{self.agent_type}:{self.agent_name} (depth {self.depth})"

    @property
    def label(self) -> str:
        if self.agent_type == self.Type.MAIN:
            return self.agent_name
        index = f"[{self.instance}]" if self.instance else ""
        return f"{self.agent_type}:{self.agent_name}{index}"

    @property
    def instance_name(self) -> str:
        """`research[2]`: how an instance is named on the page and in its events."""
        return f"{self.agent_name}[{self.instance}]"


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
        # A reviewer answered the agent instead of deciding: the tool did not run, and the
        # model got the answer as the call's result (agents.runtime.loop.decision_result).
        RESPONDED = "responded"

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
    # Kept when the user is deleted: the trail still says who decided.
    decided_by_name = models.CharField(max_length=150, blank=True)
    decided_at = models.DateTimeField(null=True, blank=True)
    timeout = models.PositiveIntegerField(null=True, blank=True)
    expires_at = models.DateTimeField(null=True, blank=True)
    on_timeout = models.CharField(
        max_length=10, choices=OnTimeout.choices, default=OnTimeout.REJECT
    )
    resumed_at = models.DateTimeField(null=True, blank=True)
    # The ladder it was raised with (agents.runtime.ladder), in seconds before the deadline:
    # reminders earliest first, and how many of them are behind it (sent, or already past when
    # it was raised); the escalation group and time, and when it was escalated.
    reminders = models.JSONField(default=list, blank=True)
    reminders_sent = models.PositiveSmallIntegerField(default=0)
    escalate_to = models.CharField(max_length=150, blank=True)
    escalate_before = models.PositiveIntegerField(null=True, blank=True)
    escalated_at = models.DateTimeField(null=True, blank=True)
    # When the sweeper next has a step of the ladder to apply (None: no step left).
    next_step_at = models.DateTimeField(null=True, blank=True)
    # A reviewer may move the deadline once (agents.reminders.extend).
    extended_at = models.DateTimeField(null=True, blank=True)
    extended_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, models.SET_NULL, null=True, blank=True, related_name="+"
    )
    extended_by_name = models.CharField(max_length=150, blank=True)
    extension_seconds = models.PositiveIntegerField(null=True, blank=True)
    extension_reason = models.TextField(blank=True)
    # The policy in force when the suspension was made (agents.policy), kept with it so a
    # reload of the agent file does not change who may decide a request already shown.
    policy = models.JSONField(default=dict, blank=True)
    # How the card explains the call, as the tool (with the agent's tool_overrides) declared it
    # when the call was made (agents.presentation): its description, summary template, what
    # approving does, and the reasons offered for a rejection.
    presentation = models.JSONField(default=dict, blank=True)
    # A reviewer dismissed it from the inbox without deciding (agents.decisions.ignore): it stays
    # pending, and its deadline still applies.
    ignored_at = models.DateTimeField(null=True, blank=True)
    ignored_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, models.SET_NULL, null=True, blank=True, related_name="+"
    )
    ignored_by_name = models.CharField(max_length=150, blank=True)
    # What the reviewer is shown, to bind a decision to it: the SHA-256 of the arguments
    # (canonical JSON), the agent version, and the SHA-256 of the tool's definition.
    args_hash = models.CharField(max_length=64, blank=True)
    agent_version = models.PositiveIntegerField(null=True, blank=True)
    tool_digest = models.CharField(max_length=64, blank=True)
    # The signed receipt of its decision (agents.receipts): a compact JWS, and its place in
    # the thread's chain of receipts (1, 2, ...). Unique per thread: two decisions that did
    # not hold the thread's lock cannot both take the same place and fork the chain.
    receipt = models.TextField(blank=True, default="")
    receipt_seq = models.PositiveIntegerField(null=True, blank=True)
    # Which tier of review decided it (agents.tiers.Tier: rule, grant, history, model, person,
    # deadline); empty while pending, and for a cancelled one. A database default too, so a
    # process of the previous version inserting a row during a rolling upgrade still can.
    tier = models.CharField(max_length=10, blank=True, default="", db_default="")
    # What a reviewing model said of it (agents.reviewing): {"model", "mode" (shadow or
    # decide), "recommendation" (approve, reject or escalate), "reason", "outcome" (recommended,
    # decided, escalated or failed), "error"}; empty when no model reviewed it.
    review = models.JSONField(default=dict, blank=True, db_default={})
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["created_at", "id"]
        constraints = [
            models.UniqueConstraint(
                fields=["frame", "tool_use_id"], name="suspension_per_tool_use"
            ),
            models.UniqueConstraint(fields=["thread", "receipt_seq"], name="receipt_per_place"),
        ]
        indexes = [
            # agents.grants.proposal: the approvals of the same arguments within a day.
            models.Index(
                fields=["args_hash", "decided_at"],
                name="suspension_approved_args_idx",
                condition=Q(status="approved"),
            ),
            # The inbox and GET /api/suspensions?status=pending: pending ones, oldest first.
            models.Index(
                fields=["created_at", "id"],
                name="suspension_pending_idx",
                condition=Q(status="pending"),
            ),
            # agents.deadlines.expire_overdue: pending ones past their deadline.
            models.Index(
                fields=["expires_at"], name="suspension_overdue_idx", condition=Q(status="pending")
            ),
            models.Index(fields=["thread", "created_at"], name="suspension_thread_idx"),
            # agents.history.Window: an agent's requests of a tool in a window, approved or
            # still waiting (a count or a sum over history, per agent).
            models.Index(
                fields=["agent_name", "tool_name", "created_at"],
                name="suspension_tally_idx",
                condition=Q(status__in=["approved", "pending"]),
            ),
            # approvals.triage: the pending requests that are the same call, counted whole.
            models.Index(
                fields=["args_hash", "agent_name", "tool_name"],
                name="suspension_triage_idx",
                condition=Q(status="pending"),
            ),
            # agents.reminders.apply_ladder_steps: pending ones with a reminder or escalation due.
            models.Index(
                fields=["next_step_at"],
                name="suspension_step_due_idx",
                condition=Q(status="pending", next_step_at__isnull=False),
            ),
            # agents.reviewing.verdicts.settle_unanswered and agents.due: pending ones whose
            # reviewing model has not answered yet.
            models.Index(
                fields=["created_at"],
                name="suspension_review_asked_idx",
                condition=Q(status="pending", review__outcome="asked"),
            ),
        ]
        permissions = [("decide_suspension", "Can approve, reject or answer suspensions")]

    def __str__(self) -> str:
        return f"{self.tool_name} ({self.status})"

    @property
    def pending(self) -> bool:
        return self.status == self.Status.PENDING

    @property
    def registered_tool(self) -> Tool | None:
        """The tool of this name as registered now (None when none is): a suspension made
        before it kept its policy and presentation is decided and shown by it
        (agents.policy.of, agents.presentation.payload)."""
        return registry.get(self.tool_name)

    def outcome(self) -> dict[str, Any]:
        """The recorded decision, as the API reports it."""
        return {
            "status": self.status,
            "approved": self.approved,
            "reason": self.reason,
            "modifiedArgs": self.modified_args,
            "response": self.response,
            "decided_by": self.decided_by_name or None,
            "decided_at": self.decided_at.isoformat() if self.decided_at else None,
            # The signed receipt (agents.receipts); None for a decision made before receipts.
            "receipt": self.receipt or None,
        }


class Vote(models.Model):
    """One reviewer's approval or rejection of a suspension that needs a quorum."""

    suspension = models.ForeignKey(Suspension, models.CASCADE, related_name="votes")
    user = models.ForeignKey(settings.AUTH_USER_MODEL, models.SET_NULL, null=True, blank=True)
    user_name = models.CharField(max_length=150, blank=True)
    approved = models.BooleanField()
    reason = models.TextField(blank=True)
    # The arguments this vote approved (an edit restarts the count: earlier votes approved
    # something else).
    args_hash = models.CharField(max_length=64, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["created_at", "id"]
        constraints = [
            models.UniqueConstraint(
                fields=["suspension", "user", "args_hash"], name="vote_per_reviewer"
            )
        ]


class Grant(models.Model):
    """A standing grant: a reviewer's approval, given ahead, of an agent's (or MCP server's)
    calls of one tool whose arguments meet `conditions`, for a while and a number of times,
    optionally for one run or one requester only (agents.grants)."""

    id = models.UUIDField(primary_key=True, default=uuid.uuid4, editable=False)
    agent_name = models.CharField(max_length=150)
    tool_name = models.CharField(max_length=200)
    # Conditions of the policy's rule language (agents.rules), all of which must hold; none:
    # any arguments.
    conditions = models.JSONField(default=list, blank=True)
    thread = models.ForeignKey(Thread, models.CASCADE, null=True, blank=True, related_name="grants")
    requester = models.ForeignKey(
        settings.AUTH_USER_MODEL, models.CASCADE, null=True, blank=True, related_name="+"
    )
    requester_name = models.CharField(max_length=150, blank=True)
    max_uses = models.PositiveIntegerField()
    uses = models.PositiveIntegerField(default=0)
    created_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, models.SET_NULL, null=True, blank=True, related_name="+"
    )
    created_by_name = models.CharField(max_length=150, blank=True)
    created_at = models.DateTimeField(default=timezone.now)
    expires_at = models.DateTimeField()
    # The request whose decision made it.
    made_with = models.ForeignKey(
        "Suspension", models.SET_NULL, null=True, blank=True, related_name="+"
    )
    revoked_at = models.DateTimeField(null=True, blank=True)
    revoked_by_name = models.CharField(max_length=150, blank=True)
    # When GRANT_EXPIRED was recorded (its lifetime passed, or its count was spent).
    ended_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["-created_at"]
        indexes = [models.Index(fields=["agent_name", "tool_name"], name="grant_target_idx")]


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
        # The run stops because every agent instance of it waits for a person, and goes on
        # when one may work again (agents.run_status).
        THREAD_SUSPENDED = "THREAD_SUSPENDED"
        THREAD_RESUMED = "THREAD_RESUMED"
        THREAD_COMPLETED = "THREAD_COMPLETED"
        THREAD_FAILED = "THREAD_FAILED"
        THREAD_CANCELLED = "THREAD_CANCELLED"
        # A cancel that arrived while a tool ran: THREAD_CANCELLED follows its result.
        THREAD_CANCELLING = "THREAD_CANCELLING"
        INSTANCE_STARTED = "INSTANCE_STARTED"
        INSTANCE_FINISHED = "INSTANCE_FINISHED"
        INPUT_REQUIRED = "INPUT_REQUIRED"
        INPUT_PROVIDED = "INPUT_PROVIDED"
        INPUT_TIMEOUT = "INPUT_TIMEOUT"
        SUSPENSION_REMINDER = "SUSPENSION_REMINDER"
        SUSPENSION_ESCALATED = "SUSPENSION_ESCALATED"
        SUSPENSION_EXTENDED = "SUSPENSION_EXTENDED"
        SUSPENSION_VOTED = "SUSPENSION_VOTED"
        SUSPENSION_IGNORED = "SUSPENSION_IGNORED"
        TOKEN_CREATED = "TOKEN_CREATED"
        TOKEN_REVOKED = "TOKEN_REVOKED"
        AGENT_VERSION_CREATED = "AGENT_VERSION_CREATED"
        # An MCP tool call relayed by mcp_gateway without a person: caller, tool, args hash,
        # duration, outcome.
        MCP_TOOL_CALLED = "MCP_TOOL_CALLED"
        # Standing grants (agents.grants): made with a decision, spent by a request it
        # approved, revoked by a reviewer, run out (its lifetime or its count).
        GRANT_CREATED = "GRANT_CREATED"
        GRANT_USED = "GRANT_USED"
        GRANT_REVOKED = "GRANT_REVOKED"
        GRANT_EXPIRED = "GRANT_EXPIRED"
        # A receipt signing key was made (the first, or by manage.py rotate_receipt_key).
        RECEIPT_KEY_ROTATED = "RECEIPT_KEY_ROTATED"
        # A reviewing model recommended, decided, escalated or failed (agents.reviewing).
        SUSPENSION_REVIEWED = "SUSPENSION_REVIEWED"

    id = models.BigAutoField(primary_key=True)
    # PROTECT: a thread or suspension with a trail is never deleted (the trail is
    # append-only); deleting one raises ProtectedError instead of cascading into it.
    thread = models.ForeignKey(Thread, models.PROTECT, null=True, blank=True, related_name="events")
    suspension = models.ForeignKey(
        Suspension, models.PROTECT, null=True, blank=True, related_name="events"
    )
    type = models.CharField(max_length=40, choices=Type.choices)
    payload = models.JSONField(default=dict)
    # Never changed once written (the trail is append-only, and on PostgreSQL a trigger
    # refuses UPDATE and DELETE): deleting a user leaves the id and name here, with no
    # database constraint to cascade or null it.
    actor = models.ForeignKey(
        settings.AUTH_USER_MODEL,
        models.DO_NOTHING,
        null=True,
        blank=True,
        db_constraint=False,
        related_name="+",
    )
    # Kept when the user is deleted: the trail still says who acted.
    actor_name = models.CharField(max_length=150, blank=True)
    # Hashed, so set before the insert (agents.chain.seal stamps the time of the write);
    # auto_now_add would replace it during the insert.
    created_at = models.DateTimeField(default=timezone.now, editable=False)
    # The hash chain (agents.chain): SHA-256 over the previous event's hash and this event's
    # content, written in the transaction that records the event.
    prev_hash = models.CharField(max_length=64, blank=True, default="", db_default="")
    hash = models.CharField(max_length=64, blank=True, default="", db_default="")

    class Meta:
        ordering = ["id"]
        indexes = [models.Index(fields=["thread", "id"], name="event_thread_idx")]

    def __str__(self) -> str:
        return f"#{self.id} {self.type}"

    def as_message(self) -> dict[str, Any]:
        """The shape of an event on the socket and in GET /api/events, docs/events.md (the actor's
        name is kept on the row, so it outlives the user)."""
        return {
            "id": self.id,
            "type": self.type,
            "thread": str(self.thread_id) if self.thread_id else None,
            "suspension": str(self.suspension_id) if self.suspension_id else None,
            "payload": self.payload,
            "created_at": self.created_at.isoformat(),
            "actor": self.actor_name or None,
        }


class ReviewCall(models.Model):
    """One call of a reviewing model about one request (agents.reviewing): what counts
    against its setting's `per_minute`, across every worker, and the tokens it spent, which
    count in the thread's usage."""

    suspension = models.OneToOneField(Suspension, models.CASCADE, related_name="review_call")
    thread = models.ForeignKey(Thread, models.CASCADE, related_name="+")
    agent_name = models.CharField(max_length=100)
    model = models.CharField(max_length=100)
    created_at = models.DateTimeField(default=timezone.now)
    input_tokens = models.PositiveIntegerField(default=0)
    output_tokens = models.PositiveIntegerField(default=0)

    class Meta:
        indexes = [
            # agents.reviewing.asking.charge: an agent's calls in the last minute.
            models.Index(fields=["agent_name", "created_at"], name="review_call_budget_idx")
        ]

    def __str__(self) -> str:
        return f"{self.model} on {self.suspension_id}"


class ReceiptKey(models.Model):
    """A key that signs decisions' receipts (agents.receipt_keys): the current one signs,
    the older ones stay published at /.well-known/jwks.json so their receipts still verify.

    Kept in the database, not in a file beside the data: every machine of a deployment
    signs, and every one serves the JWKS, so they must all see the same keys; the database is
    the one thing they already share. The private half is encrypted with a key derived from
    SECRET_KEY (which every machine shares too), so a copy of the database alone cannot sign.
    """

    kid = models.CharField(max_length=64, unique=True)
    # The public key as a JWK (kty OKP, crv Ed25519, x): published as is.
    public_jwk = models.JSONField()
    # The private key (raw 32 bytes), Fernet-encrypted under SECRET_KEY.
    private_sealed = models.TextField()
    current = models.BooleanField(default=True)
    created_at = models.DateTimeField(default=timezone.now)

    class Meta:
        ordering = ["created_at", "id"]
        constraints = [
            # One current key: two machines making the first key at once, one wins.
            models.UniqueConstraint(
                fields=["current"], condition=Q(current=True), name="one_current_receipt_key"
            )
        ]

    def __str__(self) -> str:
        return self.kid


class LiveText(models.Model):
    """What a model is writing right now in one frame: a live view, not the record.

    The worker updates it a few times a second while a model streams (agents.streaming), and
    deletes it once the finished message is stored as an AGENT_MESSAGE event. The sockets show
    it as it grows and a page opened mid-stream starts from it; no Event row is written per
    token.
    """

    frame = models.OneToOneField(StackFrame, models.CASCADE, primary_key=True, related_name="+")
    thread = models.ForeignKey(Thread, models.CASCADE, related_name="+")
    text = models.TextField(blank=True)
    # What the model is doing besides writing: "calling lookup_account…".
    activity = models.CharField(max_length=200, blank=True)
    # Grows with every update, so a page applies an update once and in order.
    seq = models.PositiveIntegerField(default=0)
    updated_at = models.DateTimeField(auto_now=True, db_index=True)
