"""Agent files: the YAML format (docs/agent-files.md), checked before anything is saved.

Sub-agents: `sub_agents` lists the agents this one may hand the conversation to; each must be
defined in the same batch of files or already stored. The tools that go with them are not
listed by hand: `use_skill` and `use_agent` are offered to every agent with sub-agents (a skill
gets no `use_skill`), and `complete` to every frame that is not the main one (see
agents.runtime.subagents). A file that lists them under `tools` is refused, so no agent file
suggests that listing them changes anything.

Agents as tools: `agents_as_tools` lists the agents this one may run as tools, each offered as
`agent__<name>` (agents.runtime.agent_tools); each must be defined in the same batch or already
stored, and may list agents of its own, but no agent lists itself. Those tools are not listed
under `tools` either, and a name they would take may not belong to a registered tool.
`stream` makes the scripted model send its text in chunks; a Claude model always streams.

Reminders and escalation: `reminders` (durations before the deadline, like [10m, 2m]),
`escalate_to` (a group, which must exist when the file is loaded) and `escalate_at` (a step
of the ladder, 1 for the first reminder, or a duration), per agent and in tool_overrides per
tool; a tool's own ladder replaces the agent's whole (agents.runtime.ladder).

Policy: who may decide the agent's requests and how (groups, four_eyes, quorum, auto_approve,
auto_reject, the allow_* flags, step_up), with `tools: {name: the same keys}` for one of its
tools (agents.policy). Its groups must exist when the file is loaded.

Other sections: `mcp_servers` (upstream MCP servers) belongs to mcp_gateway, which sits above
this app; load() hands it over through `sections_loaded`, in the same transaction. Agent fields
other apps own (AGENT_KEYS: `slack`, slack_approvals's routes) travel the same way, as
`agents`, and are not stored on the agent's row.
"""

from pathlib import Path
from typing import Any

import yaml
from django.conf import settings
from django.db import transaction
from django.dispatch import Signal

from agents import versions
from agents.models import AgentDefinition
from agents.owned_fields import SECTIONS, agent_keys_of, sections_of, without_owned
from agents.rules import PolicyError, check_policy, groups_named
from agents.runtime import agent_tools
from agents.runtime.ladder import build_ladder
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
    # Where the agent's requests are posted in Slack: slack_approvals owns and checks it
    # (AGENT_KEYS, heard through `sections_loaded`).
    "slack",
}
# The keys of one turn of a scripted agent's `script` (agents.runtime.llm.ScriptedProvider).
SCRIPT_TURN = ("text", "tool_calls", "error", "if_error")
# FIELDS, SCRIPT_TURN, the policy's keys (agents.rules), the tool overrides' (agents.runtime.
# tools.OVERRIDES) and the sections and fields other apps own are what docs/agent-files.md
# lists: tests/test_docs_reference.py fails when one is missing there.

# sections: [(path, {section: value})]; agents: [(path, agent name, {key: value})]
sections_loaded = Signal()


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
    if isinstance(data, dict) and "agents" not in data and set(data) <= set(SECTIONS):
        data = {**data, "agents": []}  # a file of other sections only (mcp_servers)
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
        listed = [t for t in names if t.startswith(agent_tools.PREFIX)]
        if listed:
            raise AgentFileError(
                f"{where}: {listed}: agent tools are offered from agents_as_tools; do not list "
                "them in 'tools'"
            )
        missing = [t for t in names if tools.get(t) is None]
        if missing:
            raise AgentFileError(f"{where}: 'tools' names unknown tool(s) {missing}")
        overrides = spec.get("tool_overrides") or {}
        if not isinstance(overrides, dict):
            raise AgentFileError(f"{where}: 'tool_overrides' must be a mapping")
        # A tool's fields other apps own (AGENT_KEYS) go to them (agent_keys_of), not here.
        overrides = {t: without_owned(o) for t, o in overrides.items()}
        for tool_name, override in overrides.items():
            if tool_name not in names:
                raise AgentFileError(
                    f"{where}: tool_overrides names '{tool_name}', which is not in its tools"
                )
            tool = tools.get(tool_name)
            assert tool is not None  # every name in `names` is a known tool (checked above)
            try:
                tool.with_overrides(override or {})
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
            if not isinstance(turn, dict) or not set(turn) <= set(SCRIPT_TURN):
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
        as_tools = check_agents_as_tools(spec.get("agents_as_tools") or [], name, where, tools)
        stream = spec.get("stream", False)
        if not isinstance(stream, bool):
            raise AgentFileError(f"{where}: 'stream' must be true or false")
        inputs = _input_rules(spec, where)
        try:
            policy = check_policy(spec.get("policy"), f"{where}: policy", names)
        except PolicyError as e:
            raise AgentFileError(str(e)) from e
        agents.append(
            {
                **inputs,
                **_ladder(spec, where),
                "name": name,
                "description": spec.get("description") or "",
                "model": model,
                "system_prompt": spec.get("system_prompt") or "",
                "tools": names,
                "sub_agents": sub_agents,
                "tool_overrides": overrides,
                "max_iterations": spec.get("max_iterations") or 10,
                # The agent file's, else the deployment's default (AGENT_MAX_TOKENS).
                "max_tokens": spec.get("max_tokens") or settings.AGENT_MAX_TOKENS,
                "script": script,
                "agents_as_tools": as_tools,
                "stream": stream,
                "policy": policy,
            }
        )
    return agents


def _input_rules(spec: dict[str, Any], where: str) -> dict[str, Any]:
    """The replies this agent accepts when it waits for input (agents.replies.input_rules);
    what is left out follows the settings."""
    from agents.replies import INPUT_TYPES

    found: dict[str, Any] = {
        "input_max_chars": None,
        "input_types": [],
        "input_timeout": None,
        "on_input_timeout": "cancel",
    }
    value = spec.get("input_max_chars")
    if value is not None:
        if isinstance(value, bool) or not isinstance(value, int) or value < 1:
            raise AgentFileError(f"{where}: 'input_max_chars' must be a positive whole number")
        found["input_max_chars"] = value
    types = spec.get("input_types")
    if types is not None:
        if not isinstance(types, list) or not types or not all(t in INPUT_TYPES for t in types):
            raise AgentFileError(
                f"{where}: 'input_types' must be a non-empty list of {', '.join(INPUT_TYPES)}"
            )
        found["input_types"] = list(dict.fromkeys(types))
    value = spec.get("input_timeout")
    if value is not None:
        if isinstance(value, bool) or not isinstance(value, int) or value < 0:
            raise AgentFileError(
                f"{where}: 'input_timeout' must be a whole number of seconds (0: no timeout)"
            )
        found["input_timeout"] = value
    value = spec.get("on_input_timeout")
    if value is not None:
        if value not in ("cancel", "continue"):
            raise AgentFileError(f"{where}: 'on_input_timeout' must be cancel or continue")
        found["on_input_timeout"] = value
    return found


def _ladder(spec: dict[str, Any], where: str) -> dict[str, Any]:
    """Reminders and escalation for the agent's requests (agents.runtime.ladder), stored as
    seconds before the deadline and escalate_at as written."""
    try:
        steps = build_ladder(
            spec.get("reminders"), spec.get("escalate_to"), spec.get("escalate_at")
        )
    except ValueError as e:
        raise AgentFileError(f"{where}: {e}") from e
    at = spec.get("escalate_at")
    return {
        "reminders": list(steps.reminders),
        "escalate_to": steps.escalate_to,
        "escalate_at": "" if at is None else str(at).strip(),
    }


def check_escalation_groups(specs: list[dict[str, Any]], sources: dict[str, str]) -> None:
    """Every group an agent or its tool_overrides escalate to must exist: a request escalated
    to no one would look handled."""
    from django.contrib.auth.models import Group

    named = {
        (spec["name"], group)
        for spec in specs
        for group in [
            spec["escalate_to"],
            *((o or {}).get("escalate_to") for o in spec["tool_overrides"].values()),
        ]
        if group
    }
    known = set(Group.objects.filter(name__in={g for _, g in named}).values_list("name", flat=True))
    for name, group in sorted(named):
        if group not in known:
            raise AgentFileError(
                f"{sources.get(name, '<string>')}: agent '{name}': escalate_to names the group "
                f"{group!r}, which does not exist; create it (the admin's Groups) first"
            )


def check_policy_groups(specs: list[dict[str, Any]], sources: dict[str, str]) -> None:
    """Every group a policy names must exist: a request only a missing group may decide
    would wait for no one."""
    from django.contrib.auth.models import Group

    named = {(spec["name"], g) for spec in specs for g in groups_named(spec["policy"])}
    known = set(Group.objects.filter(name__in={g for _, g in named}).values_list("name", flat=True))
    for name, group in sorted(named):
        if group not in known:
            raise AgentFileError(
                f"{sources.get(name, '<string>')}: agent '{name}': policy names the group "
                f"{group!r}, which does not exist; create it (the admin's Groups) first"
            )


def load(
    paths: list[Path], tools: ToolRegistry | None = None
) -> list[tuple[AgentDefinition, str | None]]:
    """Create or update agents by name from the files; all or nothing. Each agent comes with
    what its load did: "created", "updated" (a new version), or None (the definition is the
    one kept already). The sections other apps own go to their receivers of
    `sections_loaded`, in the same transaction."""
    specs = []
    sources = {}
    sections: list[tuple[str, dict[str, Any]]] = []
    owned: list[tuple[str, str, dict[str, Any]]] = []
    for path in paths:
        text = Path(path).read_text()
        parsed = parse(text, str(path), tools)
        sections.append((str(path), sections_of(text)))
        owned.extend((str(path), name, keys) for name, keys in agent_keys_of(text))
        specs.extend(parsed)
        sources.update({spec["name"]: str(path) for spec in parsed})
    with transaction.atomic():
        check_sub_agents(specs)
        check_agents_as_tools_exist(specs, sources)
        check_escalation_groups(specs, sources)
        check_policy_groups(specs, sources)
        loaded = [
            AgentDefinition.objects.update_or_create(name=spec["name"], defaults=spec)
            for spec in specs
        ]
        # A changed definition is kept as a new version, never overwritten (agents.versions);
        # no new version, nothing changed.
        kept = [(agent, created, versions.record(agent)) for agent, created in loaded]
        done = [
            (agent, "created" if created else "updated" if version else None)
            for agent, created, version in kept
        ]
        sections_loaded.send(sender=AgentDefinition, sections=sections, agents=owned)
        return done


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


def check_agents_as_tools(as_tools: Any, name: str, where: str, tools: ToolRegistry) -> list[str]:
    """The agents_as_tools of one agent, refused when its tools could not be offered as named."""
    if not isinstance(as_tools, list) or not all(isinstance(a, str) and a for a in as_tools):
        raise AgentFileError(f"{where}: 'agents_as_tools' must be a list of agent names")
    if name in as_tools:
        raise AgentFileError(f"{where}: an agent cannot be its own agent-tool")
    twice = sorted({a for a in as_tools if as_tools.count(a) > 1})
    if twice:
        raise AgentFileError(f"{where}: agents_as_tools names {twice} more than once")
    # A model sees tools by name only: `agent__x` must not also be a real tool's name.
    taken = [a for a in as_tools if tools.get(agent_tools.tool_name(a)) is not None]
    if taken:
        clashes = [agent_tools.tool_name(a) for a in taken]
        raise AgentFileError(
            f"{where}: agents_as_tools {taken} would be offered as {clashes}, which a "
            "registered tool is already named"
        )
    return as_tools


def check_agents_as_tools_exist(specs: list[dict[str, Any]], sources: dict[str, str]) -> None:
    """Every agent named in agents_as_tools must be in this batch or already stored."""
    named = {a for spec in specs for a in spec["agents_as_tools"]}
    known = {spec["name"] for spec in specs}
    stored = AgentDefinition.objects.filter(name__in=named - known).values_list("name", flat=True)
    known |= set(stored)
    for spec in specs:
        missing = [a for a in spec["agents_as_tools"] if a not in known]
        if missing:
            raise AgentFileError(
                f"{sources[spec['name']]}: agent '{spec['name']}': agents_as_tools names "
                f"unknown agent(s) {missing}; "
                "define them in the same files or load them first"
            )
