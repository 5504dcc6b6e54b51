"""The API's shapes that several views share, for the OpenAPI document (approvals.openapi).

They describe what agents.payloads.suspension_payload, approvals.api.payloads.thread_payload and
Event.as_message answer; they are not used to build the answers. The request bodies, which
the views parse with the same models, are in approvals/api/bodies.py; a view's own query sits
next to the view.
"""

from typing import TYPE_CHECKING, Any, Literal, TypeAlias

from pydantic import Field

from agents import models
from approvals.openapi import Answer, Query

# The choices as the models have them, so a new status shows in the document by itself; to a
# type checker, which cannot read them, strings.
if TYPE_CHECKING:
    ThreadStatus: TypeAlias = str
    SuspensionStatus: TypeAlias = str
    SuspensionKind: TypeAlias = str
else:
    ThreadStatus = Literal[tuple(models.Thread.Status.values)]
    SuspensionStatus = Literal[tuple(models.Suspension.Status.values)]
    SuspensionKind = Literal[tuple(models.Suspension.Kind.values)]
Limit = Field(None, ge=1, le=200, description="At most this many (1 to 200; 50 by default).")


class Decision(Answer):
    """The recorded decision."""

    status: SuspensionStatus
    approved: bool | None
    reason: str | None
    modifiedArgs: dict[str, Any] | None
    response: str | None
    decided_by: str | None
    decided_at: str | None
    receipt: str | None = Field(
        description="The decision's signed receipt: a compact JWS (EdDSA) checked with the "
        "keys at /.well-known/jwks.json (docs/receipts.md); null for a decision made before "
        "receipts."
    )


class Suspension(Answer):
    """A request for a decision (kind `confirmation`) or an answer (kind `input`)."""

    id: str
    thread: str
    agent: str
    tool: str
    tool_use_id: str
    input: dict[str, Any]
    kind: SuspensionKind
    prompt: str
    status: SuspensionStatus
    expires_at: str | None
    created_at: str | None
    decision: Decision | None
    args_hash: str | None
    agent_version: int | None
    policy: dict[str, Any] = Field(
        description="Who may decide, a quorum's count, and `allow`: the decision kinds it "
        "takes besides a rejection ({accept, edit, respond, ignore})."
    )
    presentation: dict[str, Any] = Field(
        description="What the card says: the tool's description, the call's summary (and "
        "edited_summary), what approving does, reject_reasons, asked_via, risk (low, normal "
        "or high), answer (how a question is answered: `form`, a JSON object of its schema's "
        "fields as `response`; `url`; empty for free text)."
    )
    ignored: dict[str, Any] | None = Field(
        description="Dismissed from the inbox without a decision: {by, at}; null if not."
    )
    review: dict[str, Any] | None = Field(
        default=None,
        description="What a reviewing model said of it (docs/reviewing-model.md): {model, mode "
        "(shadow or decide), recommendation (approve, reject or escalate), reason, outcome "
        "(asked, recommended, decided, escalated or failed), error}; null when no model "
        "reviewed it.",
    )


class Frame(Answer):
    id: int
    agent: str
    type: str
    depth: int


class Thread(Answer):
    """A run: its stack (top last) and what waits for a person."""

    id: str
    agent: str
    status: ThreadStatus
    title: str
    result: str | None
    error: str | None
    created_by: str | None
    created_at: str
    updated_at: str
    stack: list[Frame]
    pending_suspensions: list[Suspension]
    instances: list[dict[str, Any]]
    usage: dict[str, Any]
    live: list[dict[str, Any]]
    last_event_id: int | None


class ThreadSummary(Answer):
    id: str
    agent: str
    status: ThreadStatus
    title: str
    created_at: str
    input_prompt: str | None
    input_expires_at: str | None


class ThreadPage(Answer):
    results: list[ThreadSummary]
    next: str | None = Field(description="The next page's URL; null on the last page.")


class ThreadQuery(Query):
    status: ThreadStatus | None = Field(None, description="Only runs in this status.")
    waiting: Literal["1", "true", "0", "false"] | None = Field(
        None, description="1 or true: only runs waiting for a person (a reply or a decision)."
    )
    limit: int | None = Limit
    cursor: str | None = Field(None, description="From the previous page's `next` link.")


class SuspensionWithViewer(Suspension):
    version: dict[str, Any]
    you: dict[str, Any] = Field(description="May the caller decide it, and if not why.")


class SuspensionPage(Answer):
    results: list[SuspensionWithViewer]
    next: str | None = Field(description="The next page's URL; null on the last page.")


class SuspensionQuery(Query):
    status: SuspensionStatus | None = None
    agent: str | None = None
    thread: str | None = Field(None, description="A thread id (UUID).")
    tool: str | None = None
    kind: SuspensionKind | None = None
    ignored: Literal["1", "true", "0", "false"] | None = Field(
        None,
        description="true or 1: only those dismissed from the inbox (ignore); false or 0: "
        "only those not dismissed.",
    )
    limit: int | None = Limit
    cursor: str | None = Field(None, description="From the previous page's `next` link.")


class Outcome(Answer):
    suspension: Suspension
    outcome: Decision | None
    votes: dict[str, Any] | None = Field(None, description="A vote toward a quorum.")
    grant: dict[str, Any] | None = Field(
        None, description="The standing grant made with this approval (GET /api/grants)."
    )


class DecisionResult(Answer):
    """One item of POST /api/decisions: its suspension's id and what resumeExecution would
    have answered for it, status and body."""

    id: str = Field(description="The item's suspension, as the request named it.")
    status: Literal[200, 202, 400, 403, 404, 409, 429, 500] = Field(
        description="resumeExecution's status for it: 202 taken (or a quorum's vote cast, "
        "or dismissed), 200 the same decision again, 400 it does not fit the suspension "
        "(an approval of a question, arguments that fail the tool's schema), 403 refused by "
        "the policy (`rule`: four_eyes, groups, already_voted, not_allowed, step_up...), "
        "404 no such suspension, 409 decided already, past its deadline or a stale view, "
        "429 over the decision rate limit (`retry_after`), 500 the server failed on it. "
        "Under 300: taken."
    )
    suspension: Suspension | None = Field(
        None, description="The suspension after this item (200, 202, 409)."
    )
    outcome: Decision | None = Field(None, description="The recorded decision (200, 202, 409).")
    votes: dict[str, Any] | None = Field(None, description="A vote toward a quorum (202).")
    error: str | None = Field(None, description="Why it was refused (400 and up).")
    detail: str | None = None
    fields: dict[str, str] | None = None
    rule: str | None = Field(None, description="The policy's rule that refused it (403).")
    retry_after: int | None = Field(None, description="Seconds until the limit lets it (429).")


class DecisionResults(Answer):
    results: list[DecisionResult] = Field(description="One per item, in the request's order.")


class Extended(Answer):
    suspension: Suspension
    extension: dict[str, Any] | None
    old_expires_at: str | None = None


class Event(Answer):
    """One entry of the audit trail, as the socket sends it."""

    id: int
    type: str
    thread: str | None
    suspension: str | None
    payload: dict[str, Any]
    created_at: str
    actor: str | None


class EventPage(Answer):
    events: list[Event]
    last_id: int = Field(description="Send it back as `after` for the next page.")


class EventQuery(Query):
    after: int | None = Field(
        None, ge=0, le=2**63 - 1, description="Events after this id (0 by default)."
    )
    thread: str | None = Field(None, description="A thread id (UUID).")
    limit: int | None = Field(None, ge=1, le=200, description="1 to 200 (200 by default).")


class Grant(Answer):
    """A standing grant (agents.grants.payload)."""

    id: str
    agent: str = Field(description="The agent, or MCP server, whose requests it approves.")
    tool: str
    conditions: list[dict[str, Any]] = Field(description="All must hold: {arg, op, value}.")
    conditions_text: str
    run: str | None = Field(description="The only run it applies to, if one.")
    requester: str | None = Field(description="The only requester it applies to, if one.")
    max_uses: int
    uses: int
    left: int
    granted_by: str | None
    created_at: str
    expires_at: str
    revoked_at: str | None
    revoked_by: str | None
    made_with: str | None = Field(description="The request whose approval made it.")
    state: Literal["active", "used_up", "expired", "revoked"]


class GrantQuery(Query):
    state: Literal["active", "all"] | None = Field(
        None, description="active (the default): those that may still approve; all: the latest."
    )


class GrantList(Answer):
    grants: list[Grant]


class GrantRevoked(Answer):
    grant: Grant
    revoked: bool = Field(description="False when it was revoked already.")
