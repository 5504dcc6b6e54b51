"""Agents as tools: each agent named in `agents_as_tools` is offered as a tool `agent__<name>`.

A call runs an instance of that agent on the call's arguments, mapped to one user message by
`input_text` (docs/connect/inside.md); the instance's final text is the call's result.
This module only describes the tools; the engine runs the calls itself, never through
`Tool.func`, so it stays free of the database.
"""

import json
from dataclasses import dataclass
from typing import Any

from agents.runtime.subagents import AgentSpec
from agents.runtime.tools import Tool

PREFIX = "agent__"

# Permissive on purpose (seed §4.1): a model may pass plain text, a JSON payload or anything
# else, and `input_text` turns whatever came into the child's opening message.
INPUT_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "text": {"type": "string", "description": "Plain text input"},
        "json": {"type": "object", "description": "Arbitrary JSON payload"},
    },
    "additionalProperties": True,
}


@dataclass(frozen=True)
class AgentTool(Tool):
    """A tool that runs an instance of the agent `agent`; always immediate, no `func`."""

    agent: str = ""


def tool_name(agent: str) -> str:
    return f"{PREFIX}{agent}"


def agent_of(name: str) -> str | None:
    """The agent a tool name runs, or None when the name is not an agent-tool's.

    Agent files refuse `agent__` names under `tools` (agents.agentfiles), so in a frame built
    from an agent file every `agent__` name is an agent-tool.
    """
    agent = name.removeprefix(PREFIX)
    return agent if name.startswith(PREFIX) and agent else None


def input_text(arguments: dict[str, Any]) -> str:
    """The child's opening user message for a call's arguments (seed §4.2, rule for rule)."""
    text = arguments.get("text")
    if isinstance(text, str):
        return text
    if "json" in arguments:
        value = arguments["json"]
        return json.dumps(value, ensure_ascii=False) if isinstance(value, dict) else str(value)
    if arguments:
        return json.dumps(arguments, ensure_ascii=False)
    return ""


def unknown_message(name: str) -> str:
    """The error tool_result of a call to an agent-tool this agent is not offered."""
    return f"Unknown agent-tool: {name}"


def error_message(error: Exception | str) -> str:
    """The error tool_result of an instance that failed."""
    return f"Error: {error}"


def make_tool(spec: AgentSpec) -> AgentTool:
    """The tool offered for the agent `spec` to the agents that list it in agents_as_tools."""
    return AgentTool(
        name=tool_name(spec.name),
        description=spec.description or f"Run the agent '{spec.name}' on a task",
        input_schema=INPUT_SCHEMA,
        agent=spec.name,
    )
