"""Agent files: the YAML format of design.md, checked before anything is saved.

Sub-agents: `sub_agents` lists the agents this one may hand the conversation to; each must be
defined in the same batch of files or already stored. The tools that go with them are not
listed by hand: `use_skill` and `use_agent` are offered to every agent with sub-agents (a skill
gets no `use_skill`), and `complete` to every frame that is not the main one (see
agents.runtime.subagents). A file that lists them under `tools` is refused, so no agent file
suggests that listing them changes anything.
"""

from pathlib import Path
from typing import Any

import yaml
from django.db import transaction

from agents.models import AgentDefinition
from agents.runtime.llm import SCRIPTED
from agents.runtime.subagents import AUTOMATIC_TOOLS
from agents.runtime.tools import ToolRegistry
from agents.runtime.tools import registry as default_registry

FIELDS = {
    "name",
    "description",
    "model",
    "system_prompt",
    "tools",
    "sub_agents",
    "tool_overrides",
    "max_iterations",
    "max_tokens",
    "script",
}


class AgentFileError(ValueError):
    """The file cannot be loaded; the message names the file, the agent and the field."""


def parse(
    text: str, source: str = "<string>", tools: ToolRegistry | None = None
) -> list[dict[str, Any]]:
    tools = tools or default_registry
    try:
        data = yaml.safe_load(text)
    except yaml.YAMLError as e:
        raise AgentFileError(f"{source}: not valid YAML: {e}") from e
    if not isinstance(data, dict) or not isinstance(data.get("agents"), list):
        raise AgentFileError(f"{source}: expected a mapping with an 'agents' list")
    agents = []
    for i, spec in enumerate(data["agents"]):
        where = f"{source}: agents[{i}]"
        if not isinstance(spec, dict):
            raise AgentFileError(f"{where}: expected a mapping")
        name = spec.get("name")
        if isinstance(name, str) and name:
            where = f"{source}: agent '{name}'"
        unknown = set(spec) - FIELDS
        if unknown:
            raise AgentFileError(
                f"{where}: unknown field(s) {sorted(unknown)}; the fields are {sorted(FIELDS)}"
            )
        if not isinstance(name, str) or not name:
            raise AgentFileError(f"{where}: 'name' is required")
        names = spec.get("tools") or []
        if not isinstance(names, list) or not all(isinstance(t, str) for t in names):
            raise AgentFileError(f"{where}: 'tools' must be a list of tool names")
        automatic = sorted(set(names) & AUTOMATIC_TOOLS)
        if automatic:
            raise AgentFileError(
                f"{where}: {automatic} are offered automatically (use_skill and use_agent to "
                "agents with sub_agents, complete to sub-agents); do not list them in 'tools'"
            )
        missing = [t for t in names if tools.get(t) is None]
        if missing:
            raise AgentFileError(f"{where}: 'tools' names unknown tool(s) {missing}")
        overrides = spec.get("tool_overrides") or {}
        if not isinstance(overrides, dict):
            raise AgentFileError(f"{where}: 'tool_overrides' must be a mapping")
        for tool_name, override in overrides.items():
            if tool_name not in names:
                raise AgentFileError(
                    f"{where}: tool_overrides names '{tool_name}', which is not in its tools"
                )
            try:
                tools.get(tool_name).with_overrides(override or {})
            except (ValueError, TypeError) as e:
                problem = str(e).removeprefix(f"{tool_name}: ")
                raise AgentFileError(f"{where}: tool_overrides.{tool_name}: {problem}") from e
        model = spec.get("model") or SCRIPTED
        if not isinstance(model, str):
            raise AgentFileError(f"{where}: 'model' must be a Claude model id or '{SCRIPTED}'")
        script = spec.get("script") or []
        if not isinstance(script, list):
            raise AgentFileError(f"{where}: 'script' must be a list of turns")
        if model == SCRIPTED and not script:
            raise AgentFileError(f"{where}: a scripted agent needs a 'script'")
        for n, turn in enumerate(script, 1):
            keys = {"text", "tool_calls", "error", "if_error"}
            if not isinstance(turn, dict) or not set(turn) <= keys:
                raise AgentFileError(
                    f"{where}: script turn {n} may have only text, tool_calls, error and if_error"
                )
            for call in turn.get("tool_calls") or []:
                if not isinstance(call, dict) or not isinstance(call.get("name"), str):
                    raise AgentFileError(f"{where}: script turn {n}: each tool call needs a name")
        for key in ("max_iterations", "max_tokens"):
            value = spec.get(key)
            if value is not None and (not isinstance(value, int) or value < 1):
                raise AgentFileError(f"{where}: '{key}' must be a positive whole number")
        sub_agents = spec.get("sub_agents") or []
        if not isinstance(sub_agents, list) or not all(isinstance(a, str) for a in sub_agents):
            raise AgentFileError(f"{where}: 'sub_agents' must be a list of agent names")
        if name in sub_agents:
            raise AgentFileError(f"{where}: an agent cannot be its own sub-agent")
        agents.append(
            {
                "name": name,
                "description": spec.get("description") or "",
                "model": model,
                "system_prompt": spec.get("system_prompt") or "",
                "tools": names,
                "sub_agents": sub_agents,
                "tool_overrides": overrides,
                "max_iterations": spec.get("max_iterations") or 10,
                "max_tokens": spec.get("max_tokens") or 4096,
                "script": script,
            }
        )
    return agents


def load(
    paths: list[Path], tools: ToolRegistry | None = None
) -> list[tuple[AgentDefinition, bool]]:
    """Create or update agents by name from the files; all or nothing."""
    specs = []
    for path in paths:
        specs.extend(parse(Path(path).read_text(), str(path), tools))
    with transaction.atomic():
        check_sub_agents(specs)
        return [
            AgentDefinition.objects.update_or_create(name=spec["name"], defaults=spec)
            for spec in specs
        ]


def check_sub_agents(specs: list[dict[str, Any]]) -> None:
    """Every sub-agent named must be in this batch or already stored."""
    named = {a for spec in specs for a in spec["sub_agents"]}
    known = {spec["name"] for spec in specs}
    stored = AgentDefinition.objects.filter(name__in=named - known).values_list("name", flat=True)
    known |= set(stored)
    for spec in specs:
        missing = [a for a in spec["sub_agents"] if a not in known]
        if missing:
            raise AgentFileError(
                f"agent '{spec['name']}': unknown sub-agent(s) {missing}; define them in the same "
                "files or load them first"
            )
