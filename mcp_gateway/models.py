"""Upstream MCP servers and the durable claim of a gated call's one upstream call."""

from django.db import models

from agents.models import Suspension


class Upstream(models.Model):
    """An MCP server put behind the gateway, declared under `mcp_servers:` in an agent file.

    A model of its own rather than an AgentDefinition: an upstream has a URL, headers and
    per-tool overrides an agent has not, and no model, prompt or tools of the gateway's. Its
    requests still hang on an AgentDefinition of its name (agents.external.agent_for), as an
    outside agent's do, so the inbox and the audit trail treat them alike."""

    name = models.SlugField(max_length=100, unique=True)
    # Streamable HTTP; or, for a stdio server, `command` (its argv) and no url.
    url = models.URLField(max_length=500, blank=True)
    command = models.JSONField(default=list, blank=True)
    # A stdio server's extra environment, as written (`${NAME}` expanded at call time, as
    # headers are).
    env = models.JSONField(default=dict, blank=True)
    # As written in the file: `${NAME}` is replaced from the environment at call time
    # (mcp_gateway.upstreams.expand), so no secret is stored here.
    headers = models.JSONField(default=dict, blank=True)
    trust_annotations = models.BooleanField(default=False)
    # {tool: {execution_mode, timeout, on_timeout}}
    tool_overrides = models.JSONField(default=dict, blank=True)
    policy = models.JSONField(default=dict, blank=True)
    reminders = models.JSONField(default=list, blank=True)
    # The groups whose members may call its tools (mcp_gateway.upstreams.may_call); empty:
    # every caller whose token has the scope.
    callers = models.JSONField(default=list, blank=True)
    # The protocol revision the gateway speaks to it: blank for the newest it offers (asked
    # with `server/discover`, as the official client asks), a 2025 revision for a session (an
    # `initialize` handshake; the server may ask questions over the session), or a stateless
    # revision (2026-07-28: each call one request; questions come as `input_required`).
    revision = models.CharField(max_length=20, blank=True)
    source = models.CharField(max_length=500, blank=True)
    updated_at = models.DateTimeField(auto_now=True)

    def __str__(self) -> str:
        return self.name


class UpstreamCall(models.Model):
    """The upstream call a gated request allows once approved, made once: the row is written
    with its request (`waiting`), so it also says that the request came through the MCP proxy
    and is the upstream's to run (not an outside agent's of the same name); a worker claims it
    by moving it to `claimed` with a lease, and a retry, a second client or a second process
    finds it and waits for its result instead of calling the upstream again
    (mcp_gateway.runner)."""

    class State(models.TextChoices):
        WAITING = "waiting"  # for the decision, or for a worker once approved
        CLAIMED = "claimed"  # a worker is calling the upstream
        DONE = "done"  # the upstream answered, failed, or the call was interrupted
        NOT_RUN = "not_run"  # rejected, expired or cancelled: the upstream is never called

    suspension = models.OneToOneField(Suspension, models.PROTECT, related_name="mcp_call")
    state = models.CharField(max_length=10, choices=State.choices, default=State.WAITING)
    arguments = models.JSONField(default=dict)
    # The CallToolResult as the upstream answered it (its JSON, by alias), or the error.
    result = models.JSONField(null=True, blank=True)
    claimed_at = models.DateTimeField(auto_now_add=True)
    # Who is making the call ("host:pid") and until when its hold lasts unless renewed: a
    # claim whose lease ran out was left by a dead worker, and is finished as interrupted,
    # never called again (mcp_gateway.runner).
    worker = models.CharField(max_length=200, blank=True)
    lease_until = models.DateTimeField(null=True, blank=True)
    finished_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        indexes = [models.Index(fields=["state"], name="mcp_call_state_idx")]

    def __str__(self) -> str:
        return f"{self.suspension_id} {self.state}"
