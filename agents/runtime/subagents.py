"""Sub-agents: `use_skill` and `use_agent` push a child frame, `complete` pops it.

The child takes over the conversation: the user talks to it until it calls `complete(result)`,
and the result becomes its parent's tool_result for the `use_skill`/`use_agent` call that
started it (docs/how-it-works.md). This module stays free of the database: it
looks agents up through an `AgentResolver` the caller hands to `execute_turn(agents=...)`,
which reaches the tools as `ToolContext.agents` (the engine passes `agents.starting.find_agent`).

Which frame gets which of these tools is decided here, not in agent files:
- `use_skill` and `use_agent` go to every agent that has `sub_agents`, except that a skill
  gets no `use_skill` (skills cannot call skills);
- `complete` goes to every frame that is not the main one (`execute_turn` adds it).
The caller chooses how a sub-agent runs: `use_skill` makes it a skill frame, `use_agent` an
agent frame.
"""

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from agents.runtime.tools import ChildActivated, Tool, ToolContext, ToolError, ToolRegistry
from agents.runtime.tools import registry as default_registry
from agents.runtime.turn import Frame

USE_SKILL = "use_skill"
USE_AGENT = "use_agent"
COMPLETE_TOOL = "complete"
MAIN, SKILL, AGENT = "main", "skill", "agent"
AGENT_TOOL_PREFIX = "agent__"  # agents as tools (agents.runtime.agent_tools)
# Agent files may not list these: they are offered by the rules above.
AUTOMATIC_TOOLS = frozenset({USE_SKILL, USE_AGENT, COMPLETE_TOOL})


@dataclass(frozen=True)
class AgentSpec:
    """What a frame of an agent is built from: an agent file's entry."""

    name: str
    description: str = ""
    system_prompt: str = ""
    model: str = "scripted"
    tools: list[str] = field(default_factory=list)
    sub_agents: list[str] = field(default_factory=list)
    tool_overrides: dict[str, dict[str, Any]] = field(default_factory=dict)
    max_iterations: int = 10
    max_tokens: int = 4096
    agents_as_tools: list[str] = field(default_factory=list)


AgentResolver = Callable[[str], AgentSpec | None]

DESCRIPTIONS = {
    USE_SKILL: (
        "Hand the conversation to a skill. The user talks to the skill until it completes; "
        "its result comes back as this tool's result."
    ),
    USE_AGENT: (
        "Hand the conversation to another agent. The user talks to it until it completes; "
        "its result comes back as this tool's result."
    ),
    COMPLETE_TOOL: (
        "Finish your task and hand the result back to whoever called you. Call it once the "
        "task is done; the conversation returns to the caller."
    ),
}


def delegation_tools(agent_type: str, has_sub_agents: bool) -> list[str]:
    """The sub-agent tools a frame of this type is offered (`complete` aside)."""
    if not has_sub_agents:
        return []
    return [USE_AGENT] if agent_type == SKILL else [USE_SKILL, USE_AGENT]


def _catalogue(spec: AgentSpec, resolve: AgentResolver) -> str:
    lines = []
    for name in spec.sub_agents:
        target = resolve(name)
        about = (target.description if target is not None else "") or "no description"
        lines.append(f"- {name}: {about}")
    return "\n".join(lines)


def build_frame(
    spec: AgentSpec,
    agent_type: str,
    message: str,
    resolve: AgentResolver,
    parent_tool_use_id: str | None = None,
) -> Frame:
    """A new frame of `spec` whose conversation opens with `message`.

    The descriptions of `use_skill`/`use_agent` name the sub-agents this agent may call, so a
    real model knows the valid names; they are per-frame tool overrides.
    """
    if agent_type != MAIN and not parent_tool_use_id:
        raise AssertionError(f"a {agent_type} frame of '{spec.name}' needs a parent_tool_use_id")
    offered = delegation_tools(agent_type, bool(spec.sub_agents))
    overrides = {name: dict(value) for name, value in spec.tool_overrides.items()}
    if offered:
        catalogue = _catalogue(spec, resolve)
        for name in offered:
            overrides[name] = {"description": f"{DESCRIPTIONS[name]}\nYou may call:\n{catalogue}"}
    return Frame(
        agent_name=spec.name,
        agent_type=agent_type,
        messages=[{"role": "user", "content": [{"type": "text", "text": message}]}],
        system_prompt=spec.system_prompt,
        model=spec.model,
        tools=[t for t in spec.tools if t not in AUTOMATIC_TOOLS]
        + offered
        + [AGENT_TOOL_PREFIX + name for name in spec.agents_as_tools],
        tool_overrides=overrides,
        max_iterations=spec.max_iterations,
        max_tokens=spec.max_tokens,
        parent_tool_use_id=parent_tool_use_id,
    )


def result_for_parent(child: Frame, text: str, is_error: bool) -> tuple[str, str, bool]:
    """The tool_result a finished child hands its parent: (parent_tool_use_id, text, is_error).

    A child without a parent_tool_use_id is a programming bug (every child is built by
    `build_frame` from a tool call), so it raises AssertionError rather than guessing.
    """
    if not child.parent_tool_use_id:
        raise AssertionError(
            f"{child.agent_type} frame '{child.agent_name}' finished without a parent_tool_use_id"
        )
    return (child.parent_tool_use_id, text, is_error)


def failure_for_parent(child: Frame, text: str) -> str:
    """How a child's iteration limit or model error reads in its parent's tool_result."""
    return f"The {child.agent_type} '{child.agent_name}' failed and was closed: {text}"


def _delegate(agent_type: str) -> Callable[[dict[str, Any], ToolContext], Any]:
    def start_child(args: dict[str, Any], context: ToolContext) -> Any:
        caller: Frame = context.frame
        name = args["name"]
        if agent_type == SKILL and caller.agent_type == SKILL:
            raise ToolError("A skill cannot use another skill; call use_agent instead.")
        if name == caller.agent_name:
            raise ToolError(f"'{name}' cannot invoke itself.")
        resolve: AgentResolver | None = context.agents
        if resolve is None:
            raise ToolError("Sub-agents are not available in this run.")
        own = resolve(caller.agent_name)
        allowed = list(own.sub_agents) if own is not None else []
        if name not in allowed:
            listed = ", ".join(allowed) or "none"
            raise ToolError(
                f"'{name}' is not a sub-agent of '{caller.agent_name}' (its sub-agents: {listed})."
            )
        target = resolve(name)
        if target is None:
            raise ToolError(f"No agent named '{name}' exists any more.")
        raise ChildActivated(
            build_frame(target, agent_type, args["message"], resolve, context.tool_use_id)
        )

    return start_child


_TARGET_SCHEMA = {
    "type": "object",
    "properties": {
        "name": {"type": "string", "minLength": 1, "description": "The sub-agent to call"},
        "message": {"type": "string", "minLength": 1, "description": "What you ask of it"},
    },
    "required": ["name", "message"],
    "additionalProperties": False,
}


def register(registry: ToolRegistry) -> None:
    """Add `use_skill`, `use_agent` and `complete` to a registry."""
    registry.register(
        Tool(
            name=USE_SKILL,
            description=DESCRIPTIONS[USE_SKILL],
            input_schema=_TARGET_SCHEMA,
            func=_delegate(SKILL),
        )
    )
    registry.register(
        Tool(
            name=USE_AGENT,
            description=DESCRIPTIONS[USE_AGENT],
            input_schema=_TARGET_SCHEMA,
            func=_delegate(AGENT),
        )
    )
    registry.register(
        Tool(
            name=COMPLETE_TOOL,
            description=DESCRIPTIONS[COMPLETE_TOOL],
            input_schema={
                "type": "object",
                "properties": {"result": {"type": "string", "description": "What you produced"}},
                "required": ["result"],
            },
        )
    )


register(default_registry)
