"""The parts of an agent file other apps own, and how they are handed over.

An agent file may hold sections (`mcp_servers`) and fields of agents, of MCP servers and of
their tools' `tool_overrides` (`slack`) that belong to apps above `agents`: agents.agentfiles
checks and loads its own parts, strips these, and sends them, in the loading transaction,
through `agentfiles.sections_loaded` to the apps that own them.
"""

from typing import Any

import yaml

# Top-level sections of an agent file that other apps own: `mcp_servers` (mcp_gateway, which
# sits above agents and so hears of them through `sections_loaded`). A receiver raises
# AgentFileError for a section it refuses, which undoes the whole load.
SECTIONS = ("mcp_servers",)
# Agent fields other apps own, handed over the same way: `agents` lists every loaded agent as
# (path, name, {key: value} of the keys it has; and "tool_overrides": {tool: {key: value}} for
# its tools that have some), so a receiver can also drop what a file no longer says.
AGENT_KEYS = ("slack",)


def without_owned(override: Any) -> Any:
    """A tool override without the fields other apps own (AGENT_KEYS)."""
    if not isinstance(override, dict):
        return override
    return {k: v for k, v in override.items() if k not in AGENT_KEYS}


def owned_of(spec: dict[str, Any]) -> dict[str, Any]:
    """The fields other apps own of an agent or an MCP server: its own, and its tools' under
    `tool_overrides` ({tool: {key: value}}, only the tools that have some)."""
    owned = {key: spec[key] for key in AGENT_KEYS if key in spec}
    overrides = spec.get("tool_overrides")
    tools = {
        tool: {key: o[key] for key in AGENT_KEYS if key in o}
        for tool, o in (overrides.items() if isinstance(overrides, dict) else [])
        if isinstance(o, dict) and any(key in o for key in AGENT_KEYS)
    }
    if tools:
        owned["tool_overrides"] = tools
    return owned


def sections_of(text: str) -> dict[str, Any]:
    """The file's sections other apps own (SECTIONS), as written; parse() checked the YAML.
    An MCP server's entry is handed over without the agent fields (AGENT_KEYS) it may have:
    its requests hang on an agent of its name, so those go with the agents' (agent_keys_of)."""
    data = yaml.safe_load(text)
    found = {key: data[key] for key in SECTIONS if key in data}
    if isinstance(found.get("mcp_servers"), list):
        found["mcp_servers"] = [
            _server_without_owned(entry) if isinstance(entry, dict) else entry
            for entry in found["mcp_servers"]
        ]
    return found


def _server_without_owned(entry: dict[str, Any]) -> dict[str, Any]:
    kept = {k: v for k, v in entry.items() if k not in AGENT_KEYS}
    if isinstance(kept.get("tool_overrides"), dict):
        kept["tool_overrides"] = {t: without_owned(o) for t, o in kept["tool_overrides"].items()}
    return kept


def agent_keys_of(text: str) -> list[tuple[str, dict[str, Any]]]:
    """Each agent's name and the fields other apps own (AGENT_KEYS), as written; and each
    MCP server's (its requests' agent is its name)."""
    data = yaml.safe_load(text)
    servers = data.get("mcp_servers") if isinstance(data.get("mcp_servers"), list) else []
    entries = list(data.get("agents") or []) + [
        entry for entry in servers if isinstance(entry, dict) and isinstance(entry.get("name"), str)
    ]
    return [(spec["name"], owned_of(spec)) for spec in entries]
