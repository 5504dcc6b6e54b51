"""Upstreams as agent files declare them (`mcp_servers:`), and what each tool's mode is."""

import datetime
import os
import re
from typing import Any

from agents import external, versions
from agents.agentfiles import AgentFileError
from agents.models import AgentDefinition
from agents.rules import PolicyError, check_policy
from agents.runtime.ladder import build_ladder
from agents.runtime.tools import BLOCKING, IMMEDIATE, ON_TIMEOUT
from mcp_gateway.models import Upstream

NAME = re.compile(r"^[-a-zA-Z0-9_]{1,100}$")
FIELDS = {
    "name",
    "url",
    "command",
    "env",
    "headers",
    "trust_annotations",
    "tool_overrides",
    "policy",
    "reminders",
    "callers",
    "revision",
}
OVERRIDE_FIELDS = {"execution_mode", "timeout", "on_timeout", "irreversible"}
# `${NAME}` in a header's value: the environment variable, read at call time.
VARIABLE = re.compile(r"\$\{([A-Za-z_][A-Za-z0-9_]*)\}")
DEFAULT_TIMEOUT = 3600
# What upstream names may not be, for the endpoints' sake: /mcp/gateway is the gateway's own
# (mcp_gateway.own_tools), and /mcp names tools `<server>__<tool>` (mcp_gateway.combined).
RESERVED = "gateway"
SEPARATOR = "__"


def store_sections(sender: Any, sections: list[tuple[str, dict[str, Any]]], **kwargs: Any) -> None:
    """agents.agentfiles.sections_loaded: create or update the files' upstreams by name."""
    for source, found in sections:
        servers = found.get("mcp_servers")
        if servers is None:
            continue
        if not isinstance(servers, list):
            raise AgentFileError(f"{source}: 'mcp_servers' must be a list")
        for i, spec in enumerate(servers):
            fields = check(spec, f"{source}: mcp_servers[{i}]")
            upstream, _ = Upstream.objects.update_or_create(
                name=fields.pop("name"), defaults={**fields, "source": source}
            )
            mirror(upstream)


def mirror(upstream: Upstream, actor: Any = None) -> AgentDefinition:
    """The agent definition the upstream's requests hang on (agents.external.agent_for) takes
    its policy, reminders and tool overrides, and keeps each change as a version
    (agents.versions), as an agent file's agent does: a request raised under an older one is
    shown with the change, and approving it asks the reviewer to confirm the new rules.
    An agent the gateway runs itself may not share the name (AgentFileError)."""
    agent, _ = AgentDefinition.objects.get_or_create(
        name=upstream.name, defaults={"model": external.MODEL, "description": ""}
    )
    if agent.model != external.MODEL:
        raise AgentFileError(
            f"mcp_servers '{upstream.name}': 'name' is taken by an agent the gateway runs"
        )
    agent.description = f"MCP server {upstream.url or ' '.join(upstream.command)}"[:500]
    agent.policy = upstream.policy
    agent.reminders = upstream.reminders
    agent.tool_overrides = upstream.tool_overrides
    agent.save(update_fields=["description", "policy", "reminders", "tool_overrides"])
    versions.record(agent, actor)
    return agent


def check(spec: Any, where: str) -> dict[str, Any]:
    """One upstream's fields as stored; raises AgentFileError naming the field."""
    if not isinstance(spec, dict):
        raise AgentFileError(f"{where}: expected a mapping")
    unknown = set(spec) - FIELDS
    if unknown:
        raise AgentFileError(f"{where}: unknown field(s) {sorted(unknown)}")
    name = spec.get("name")
    if not isinstance(name, str) or not NAME.match(name):
        raise AgentFileError(f"{where}: 'name' must be a slug (letters, digits, - and _)")
    if name == RESERVED or SEPARATOR in name:
        # /mcp/gateway is the gateway's own tools; /mcp splits `<server>__<tool>` on the first
        # `__` (mcp_gateway.combined).
        raise AgentFileError(
            f"{where}: 'name' {name!r} is taken: '{RESERVED}' is the gateway's own MCP "
            f"endpoint, and a name may not hold '{SEPARATOR}'"
        )
    where = f"{where} '{name}'"
    url, command = spec.get("url"), spec.get("command")
    if (url is None) == (command is None):
        raise AgentFileError(
            f"{where}: give exactly one of 'url' (a streamable HTTP server) and 'command' "
            "(a stdio server's program and arguments)"
        )
    if url is not None and (
        not isinstance(url, str) or not url.startswith(("http://", "https://"))
    ):
        raise AgentFileError(f"{where}: 'url' must be an http(s) URL (streamable HTTP)")
    if command is not None and (
        not isinstance(command, list)
        or not command
        or not all(isinstance(part, str) and part for part in command)
    ):
        raise AgentFileError(f"{where}: 'command' must be a list of words: [program, arg, ...]")
    headers = _text_mapping(spec.get("headers"), f"{where}: 'headers' must map names to text")
    env = _text_mapping(spec.get("env"), f"{where}: 'env' must map variable names to text")
    if env and command is None:
        raise AgentFileError(f"{where}: 'env' is for a stdio server ('command'), not a URL")
    if headers and command is not None:
        raise AgentFileError(f"{where}: 'headers' are for a URL; a stdio server takes 'env'")
    overrides = spec.get("tool_overrides") or {}
    if not isinstance(overrides, dict):
        raise AgentFileError(f"{where}: 'tool_overrides' must map tool names to settings")
    for tool, o in overrides.items():
        if not isinstance(o, dict) or set(o) - OVERRIDE_FIELDS:
            raise AgentFileError(
                f"{where}: tool_overrides.{tool}: one of {sorted(OVERRIDE_FIELDS)}"
            )
        if o.get("execution_mode", BLOCKING) not in (BLOCKING, IMMEDIATE):
            raise AgentFileError(
                f"{where}: tool_overrides.{tool}.execution_mode: {BLOCKING} or {IMMEDIATE}"
            )
        if not isinstance(o.get("timeout", 1), int) or o.get("timeout", 1) < 1:
            raise AgentFileError(f"{where}: tool_overrides.{tool}.timeout: whole seconds")
        if o.get("on_timeout", ON_TIMEOUT[0]) not in ON_TIMEOUT:
            raise AgentFileError(f"{where}: tool_overrides.{tool}.on_timeout: one of {ON_TIMEOUT}")
        if not isinstance(o.get("irreversible", False), bool):
            raise AgentFileError(f"{where}: tool_overrides.{tool}.irreversible: true or false")
    callers = spec.get("callers") or []
    if not isinstance(callers, list) or not all(isinstance(g, str) and g for g in callers):
        raise AgentFileError(f"{where}: 'callers' must be a list of group names")
    # The MCP types (pydantic models, 0.2 s to import) when a file names an upstream, not in
    # every process that sets Django up (this module is loaded by mcp_gateway's ready()).
    from mcp_types.version import HANDSHAKE_PROTOCOL_VERSIONS, MODERN_PROTOCOL_VERSIONS

    revision = spec.get("revision") or ""
    if isinstance(revision, datetime.date):
        revision = revision.isoformat()  # YAML reads an unquoted 2026-07-28 as a date
    if revision and revision not in MODERN_PROTOCOL_VERSIONS + HANDSHAKE_PROTOCOL_VERSIONS:
        raise AgentFileError(
            f"{where}: 'revision' is one of {list(MODERN_PROTOCOL_VERSIONS)} (a stateless "
            f"revision) or {list(HANDSHAKE_PROTOCOL_VERSIONS)} (sessions), or left out for "
            "the newest the upstream speaks, as the official client chooses"
        )
    try:
        policy = check_policy(spec.get("policy"), where)
        reminders = list(build_ladder(spec.get("reminders")).reminders)
    except (PolicyError, ValueError) as e:
        raise AgentFileError(f"{where}: {e}") from e
    return {
        "name": name,
        "url": url or "",
        "command": command or [],
        "env": env,
        "headers": headers,
        "trust_annotations": bool(spec.get("trust_annotations", False)),
        "tool_overrides": overrides,
        "policy": policy,
        "reminders": reminders,
        "callers": callers,
        "revision": revision,
    }


def _text_mapping(value: Any, refusal: str) -> dict[str, str]:
    value = value or {}
    if not isinstance(value, dict) or not all(
        isinstance(k, str) and isinstance(v, str) for k, v in value.items()
    ):
        raise AgentFileError(refusal)
    return value


def expand(headers: dict[str, str], environ: dict[str, str] | None = None) -> dict[str, str]:
    """The headers (or a stdio server's env) with `${NAME}` replaced from the environment
    (empty when unset)."""
    env = os.environ if environ is None else environ
    return {k: VARIABLE.sub(lambda m: env.get(m.group(1), ""), v) for k, v in headers.items()}


def may_call(upstream: Upstream, user: Any) -> bool:
    """May `user` (a token's, with the scope) call this upstream's tools: a member of one of
    its `callers` groups, or anyone when it names none."""
    if not upstream.callers:
        return True
    return bool(user.groups.filter(name__in=upstream.callers).exists())


def refusal(upstream: Upstream) -> str:
    """Why a caller outside the upstream's `callers` groups is refused, in its words."""
    groups = " or ".join(upstream.callers)
    return f"Only members of group {groups} may call the tools of {upstream.name}."


def is_immediate(upstream: Upstream, tool: str, read_only: bool) -> bool:
    """Every tool waits for a person unless its override says immediate, or it says it only
    reads and the upstream's annotations are trusted (the specification calls them hints)."""
    mode = upstream.tool_overrides.get(tool, {}).get("execution_mode")
    if mode is not None:
        return mode == IMMEDIATE
    return upstream.trust_annotations and read_only


def override(upstream: Upstream, tool: str) -> tuple[int, str]:
    """The tool's (timeout, on_timeout) for its requests."""
    o = upstream.tool_overrides.get(tool, {})
    return int(o.get("timeout", DEFAULT_TIMEOUT)), o.get("on_timeout", "reject")


def irreversible(upstream: Upstream, tool: str) -> bool:
    """Its calls cannot be undone, as the upstream's tool_overrides say: a reviewing model
    never decides them unless its setting allows (agents.reviewing)."""
    return bool(upstream.tool_overrides.get(tool, {}).get("irreversible", False))
