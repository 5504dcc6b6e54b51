"""The writes of an MCP call: a gated call's request (raised, or attached to on a retry) with
its upstream call's row, and the audit event of every call."""

from collections.abc import Callable
from typing import Any
from uuid import UUID

from django.db import IntegrityError, transaction

from access import admission
from agents import events, external
from agents.hashing import canonical_hash
from agents.models import AgentDefinition, Event, Suspension, Thread
from mcp_gateway.models import Upstream, UpstreamCall
from mcp_gateway.upstreams import irreversible, override

ATTEMPTS = 3


def run_id(agent: AgentDefinition, user: Any) -> str:
    """The caller's run: one thread per caller and upstream, so its calls are grouped on one
    thread page; a new one once a reviewer has cancelled it (a cancelled run takes no more
    requests: agents.external.RunEnded)."""
    prefix = f"mcp:{user.pk}:"
    ended = Thread.objects.filter(
        agent=agent,
        created_by=user,
        external_run_id__startswith=prefix,
        status__in=(Thread.Status.COMPLETED, Thread.Status.FAILED, Thread.Status.CANCELLED),
    ).count()
    return f"{prefix}{ended + 1}"


def call_key(user: Any, tool: str, arguments: dict[str, Any]) -> str:
    """The idempotency key of a call: the same caller, tool and arguments give the same key,
    so a retry of a held call finds the request it raised."""
    return canonical_hash({"caller": user.pk, "tool": tool, "arguments": arguments})[:64]


def _open_request(
    agent: AgentDefinition, user: Any, run: str, key: str
) -> tuple[Suspension | None, int]:
    """The latest request of this key the caller has not yet been answered (resumed_at is set
    when its answer reached the client: agents.external.acknowledge), and how many there were."""
    made = list(
        Suspension.objects.select_related("thread")
        .filter(
            thread__agent=agent,
            thread__created_by=user,
            thread__external_run_id=run,
            tool_use_id__startswith=key,
        )
        .order_by("-created_at")
    )
    latest = made[0] if made else None
    if latest is not None and latest.resumed_at is None:
        return latest, len(made)
    return None, len(made)


def attach_or_raise(
    upstream: Upstream,
    user: Any,
    tool: str,
    arguments: dict[str, Any],
    described: Any,
    via: str = "",
) -> Suspension:
    """The request for this call: the one a retry attaches to, else a new one, raised as
    POST /api/requests raises an outside agent's (kind confirmation, the upstream's name as
    the agent, the tool's input schema so the card's editor works). `via` names the calling
    client on the card. Raises ratelimits.Limited."""
    agent = external.agent_for(upstream.name, user)
    # The upstream's policy and reminders, in the shape raise_request reads them from.
    rules = AgentDefinition(
        name=upstream.name, policy=upstream.policy, reminders=upstream.reminders
    )
    timeout, on_timeout = override(upstream, tool)
    asks = f"{user.username} asks to run {tool} on {upstream.name}"

    def build(run: str, key: str) -> external.Request:
        return external.Request(
            agent=upstream.name,
            run_id=run,
            tool=tool,
            arguments=arguments,
            schema=described.input_schema or {},
            prompt=f"{asks} ({via})." if via else f"{asks}.",
            kind=Suspension.Kind.CONFIRMATION,
            timeout=timeout,
            on_timeout=on_timeout,
            key=key,
            description=described.description or "",
            title=f"{user.username}'s MCP calls to {upstream.name}",
            irreversible=irreversible(upstream, tool),
        )

    return ask(agent, rules, user, call_key(user, tool, arguments), build, upstream_call=arguments)


def ask(
    agent: AgentDefinition,
    rules: AgentDefinition,
    user: Any,
    key: str,
    build: Callable[[str, str], external.Request],
    upstream_call: dict[str, Any] | None = None,
) -> Suspension:
    """The caller's open request of `key` in its run (a retry attaches to it), else a new one,
    `build(run, key)`, raised under the policy and ladder of `rules`; with `upstream_call` (its
    arguments) the upstream call it allows once approved is written with it. A key already
    answered once is raised again under a numbered key. Raises ratelimits.Limited."""
    for _ in range(ATTEMPTS):
        run = run_id(agent, user)
        found, count = _open_request(agent, user, run, key)
        if found is not None:
            return found
        request = build(run, key if count == 0 else f"{key}-{count}")
        try:
            with admission.admitted(agent), transaction.atomic():
                s = external.raise_request(agent, rules, request, user)
                if upstream_call is not None:
                    # Its upstream call, made once it is approved (mcp_gateway.runner).
                    UpstreamCall.objects.create(suspension=s, arguments=upstream_call)
                return s
        except (IntegrityError, external.RunEnded):
            continue
    raise IntegrityError("Another call raised this request meanwhile.")


def reread(pk: UUID) -> Suspension:
    return Suspension.objects.select_related("thread").get(pk=pk)


def called(
    user: Any,
    upstream: str,
    tool: str,
    arguments: dict[str, Any],
    result: dict[str, Any],
    seconds: float,
    s: Suspension | None = None,
    outcome: str | None = None,
) -> Event:
    """MCP_TOOL_CALLED, not yet written: who called which tool, with what (its hash), how
    long, and how it ended. The arguments themselves are the request's, when one was raised."""
    return Event(
        type=Event.Type.MCP_TOOL_CALLED,
        thread_id=s.thread_id if s else None,
        suspension_id=s.pk if s else None,
        actor=user,
        actor_name=getattr(user, "username", ""),
        payload={
            "agent": upstream,
            "tool": tool,
            "args_hash": canonical_hash(arguments),
            "duration_ms": round(seconds * 1000, 1),
            "outcome": outcome or ("error" if result.get("isError") else "ok"),
            "gated": s is not None,
        },
    )


def record_calls(written: list[Event]) -> None:
    """Write calls' events (`called`) in one transaction, chained in list order."""
    with transaction.atomic():
        events.record_many(written)


def done_result(s: Suspension) -> dict[str, Any] | None:
    """The stored answer of the request's upstream call, once there is one."""
    call = UpstreamCall.objects.filter(suspension=s).only("state", "result").first()
    return call.result if call is not None and call.state == UpstreamCall.State.DONE else None
