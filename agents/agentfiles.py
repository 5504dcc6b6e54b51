"""Agent files: the YAML format of design.md, checked before anything is saved."""

from pathlib import Path
from typing import Any

import yaml
from django.db import transaction

from agents.models import AgentDefinition
from agents.runtime.llm import SCRIPTED
from agents.runtime.tools import ToolRegistry
from agents.runtime.tools import registry as default_registry

FIELDS = {
    "name", "description", "model", "system_prompt", "tools", "sub_agents", "tool_overrides",
    "max_iterations", "max_tokens", "script",
}


class AgentFileError(ValueError):
    """The file cannot be loaded; the message names the file, the agent and the field."""


def parse(text: str, source: str = "<string>", tools: ToolRegistry | None = None) -> list[dict[str, Any]]:
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
        missing = [t for t in names if tools.get(t) is None]
        if missing:
            raise AgentFileError(f"{where}: 'tools' names unknown tool(s) {missing}")
        overrides = spec.get("tool_overrides") or {}
        if not isinstance(overrides, dict):
            raise AgentFileError(f"{where}: 'tool_overrides' must be a mapping")
        for tool_name, override in overrides.items():
            if tool_name not in names:
                raise AgentFileError(f"{where}: tool_overrides names '{tool_name}', which is not in its tools")
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


def load(paths: list[Path], tools: ToolRegistry | None = None) -> list[tuple[AgentDefinition, bool]]:
    """Create or update agents by name from the files; all or nothing."""
    specs = []
    for path in paths:
        specs.extend(parse(Path(path).read_text(), str(path), tools))
    with transaction.atomic():
        return [
            AgentDefinition.objects.update_or_create(name=spec["name"], defaults=spec) for spec in specs
        ]
