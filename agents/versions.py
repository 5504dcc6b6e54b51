"""Agent versions, and decisions bound to what the reviewer saw (issue 12, part 4).

An agent definition is never overwritten silently: each change (a file loaded again with other
content, an edit in the admin) adds an AgentVersion row with the whole definition and its hash,
bumps AgentDefinition.version and writes AGENT_VERSION_CREATED. A suspension remembers the
version it was made under, the hash of its arguments and the hash of the tool as the agent
offered it (agents.engine), so a decision can be checked against them:

- a decision may carry `seen: {"args_hash", "agent_version"}` (the pages send it; an API
  client may leave it out). Arguments that hash differently from the suspension's are a view of
  another request: refused (409 `stale_view`).
- a suspension made under an agent version that has since changed, or whose tool is now
  offered differently (description, schema or mode), is shown with the change, and approving it
  needs `confirmVersionChange: true` (409 `version_changed` without it). Rejecting never does:
  saying no to an action is always safe.
"""

from dataclasses import dataclass
from typing import Any

from django.db import transaction

from agents import events, locks, statements
from agents.hashing import canonical_hash
from agents.models import AgentDefinition, AgentVersion, Event, Suspension
from agents.runtime.tools import Tool
from agents.runtime.tools import registry as default_registry

# What an agent does, as versioned: every field a run is built from.
VERSIONED = (
    "description",
    "model",
    "system_prompt",
    "tools",
    "sub_agents",
    "tool_overrides",
    "max_iterations",
    "max_tokens",
    "script",
    "agents_as_tools",
    "stream",
    "input_max_chars",
    "input_types",
    "input_timeout",
    "on_input_timeout",
    "reminders",
    "escalate_to",
    "escalate_at",
    "policy",
)


def snapshot(agent: AgentDefinition) -> dict[str, Any]:
    return {"name": agent.name, **{field: getattr(agent, field) for field in VERSIONED}}


def record(agent: AgentDefinition, actor: Any = None) -> AgentVersion | None:
    """Keep the definition as a new version if it differs from the last one kept; the new
    version, or None when nothing changed. Call it after saving the definition."""
    definition = snapshot(agent)
    digest = canonical_hash(definition)
    with transaction.atomic():
        locks.agent(pk=agent.pk)
        last = AgentVersion.objects.filter(agent=agent).order_by("-version").first()
        if last is not None and last.digest == digest:
            return None
        number = last.version + 1 if last is not None else max(agent.version, 1)
        version = AgentVersion.objects.create(
            agent=agent, version=number, definition=definition, digest=digest
        )
        AgentDefinition.objects.filter(pk=agent.pk).update(version=number)
        agent.version = number
        events.record(
            Event.Type.AGENT_VERSION_CREATED,
            actor=actor,
            payload={
                "agent": agent.name,
                "version": number,
                "previous": last.version if last is not None else None,
                "digest": digest,
                "changed": changed_fields(last.definition, definition) if last else [],
            },
        )
    return version


def changed_fields(before: dict[str, Any], after: dict[str, Any]) -> list[str]:
    return sorted(k for k in set(before) | set(after) if before.get(k) != after.get(k))


def tool_digest(tool: Tool) -> str:
    """The tool as a reviewer is told about it: what it is, what it takes, how it runs."""
    return canonical_hash(
        {
            "name": tool.name,
            "description": tool.description,
            "input_schema": tool.input_schema,
            "execution_mode": tool.execution_mode,
            "kind": tool.kind,
        }
    )


def binding_fields(
    agent_name: str, tool: Tool, args: Any, agent: AgentDefinition | None = None
) -> dict[str, Any]:
    """The Suspension columns that bind a later decision to what is shown now. `agent`: the
    agent's row as the caller read it in this step, if it has it."""
    version: int | None
    if agent is not None and agent.name == agent_name:
        version = agent.version
    else:
        version = (
            AgentDefinition.objects.filter(name=agent_name)
            .values_list("version", flat=True)
            .first()
        )
    return {
        "args_hash": canonical_hash(args),
        "agent_version": version,
        "tool_digest": tool_digest(tool),
    }


@dataclass(frozen=True)
class VersionState:
    made_under: int | None
    current: int | None
    tool_changed: bool
    fields: tuple[str, ...] = ()  # what differs between the two versions, when both are kept

    @property
    def changed(self) -> bool:
        return self.tool_changed or (
            self.made_under is not None and self.current != self.made_under
        )

    def detail(self, agent: str, tool: str) -> str:
        if self.current is None:
            return f"The agent {agent} is no longer defined; this request came from an old version."
        parts = []
        if self.made_under is not None and self.current != self.made_under:
            changed = f" (changed: {', '.join(self.fields)})" if self.fields else ""
            parts.append(
                f"This request was made under version {self.made_under} of {agent}; "
                f"the agent is now at version {self.current}{changed}."
            )
        if self.tool_changed:
            parts.append(f"The tool {tool} is now described or run differently.")
        return " ".join(parts)


def _current_tool(agent: AgentDefinition | None, name: str) -> Tool | None:
    tool = default_registry.get(name)
    if tool is None or agent is None:
        return tool
    try:
        return tool.with_overrides((agent.tool_overrides or {}).get(name, {}))
    except ValueError:
        return tool


def version_state(s: Suspension) -> VersionState:
    """How the agent and the tool now compare with when the suspension was made."""
    found = statements.agent_now(s.agent_name)
    agent = AgentDefinition(pk=found[0], tool_overrides=found[2]) if found else None
    current = found[1] if found else None
    tool_changed = False
    if s.tool_digest:
        tool = _current_tool(agent, s.tool_name)
        tool_changed = tool is None or tool_digest(tool) != s.tool_digest
    fields: tuple[str, ...] = ()
    if agent is not None and s.agent_version is not None and current != s.agent_version:
        kept = dict(
            AgentVersion.objects.filter(
                agent_id=agent.pk, version__in=[s.agent_version, current]
            ).values_list("version", "definition")
        )
        if len(kept) == 2 and current is not None:
            fields = tuple(changed_fields(kept[s.agent_version], kept[current]))
    return VersionState(s.agent_version, current, tool_changed, fields)


def version_payload(s: Suspension) -> dict[str, Any]:
    """For the API and the cards: what the request was made under, and whether it changed."""
    state = version_state(s)
    return {
        "args_hash": s.args_hash or None,
        "agent_version": s.agent_version,
        "current_agent_version": state.current,
        "changed": state.changed,
        "detail": state.detail(s.agent_name, s.tool_name) if state.changed else "",
    }


class Unbound(Exception):
    """The decision does not match what it claims to answer (a 409 for the caller)."""

    def __init__(self, code: str, detail: str) -> None:
        super().__init__(detail)
        self.code = code
        self.detail = detail


def check(s: Suspension, decision: dict[str, Any]) -> None:
    """Refuse a decision made on another view of the request, or an approval of a request
    whose agent or tool changed since, unless that change is confirmed."""
    seen = decision.get("seen") or {}
    if seen.get("args_hash") and s.args_hash and seen["args_hash"] != s.args_hash:
        raise Unbound(
            "stale_view",
            "The arguments you saw are not this request's arguments; reload it and decide again.",
        )
    if not s.pending:
        return
    approving = "response" in decision or decision.get("approved")
    if not approving:
        return
    if (
        seen.get("agent_version") is not None
        and s.agent_version is not None
        and seen["agent_version"] != s.agent_version
    ):
        raise Unbound(
            "stale_view",
            f"You saw version {seen['agent_version']} of the agent; this request was made "
            f"under version {s.agent_version}. Reload it and decide again.",
        )
    state = version_state(s)
    if state.changed and not decision.get("confirmVersionChange"):
        raise Unbound(
            "version_changed",
            state.detail(s.agent_name, s.tool_name)
            + " Check the request against the new version, then approve with "
            "confirmVersionChange: true.",
        )
