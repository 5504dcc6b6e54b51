"""Agent files with agents_as_tools and stream: who may be named, and the demo that uses them."""

import dataclasses
from pathlib import Path
from typing import Any

import pytest

from agents.agentfiles import AgentFileError, load, parse
from agents.models import AgentDefinition
from agents.runtime.agent_tools import agent_of, input_text, make_tool
from agents.runtime.llm import ScriptedProvider
from agents.runtime.loop import execute_turn
from agents.runtime.subagents import AgentSpec
from agents.runtime.tools import Tool, ToolContext, ToolRegistry
from agents.runtime.tools import registry as default_registry
from agents.runtime.turn import Decision, Frame, TurnAction

ROOT = Path(__file__).resolve().parents[2]

HOST = """
agents:
  - name: host
    script: [{text: hi}]
    agents_as_tools: [helper, other]
    stream: true
"""
HELPERS = """
agents:
  - name: helper
    script: [{text: hi}]
    agents_as_tools: [other]
  - name: other
    script: [{text: hi}]
"""


def write(tmp_path: Path, name: str, text: str) -> Path:
    path = tmp_path / name
    path.write_text(text)
    return path


def one(**fields: str) -> str:
    """A file of one scripted agent `a`, with `fields` as extra YAML lines."""
    lines = ["agents:", "  - name: a", "    script: [{text: hi}]"]
    lines += [f"    {key}: {value}" for key, value in fields.items()]
    return "\n".join(lines) + "\n"


class LoadTestCase:
    def test_both_fields_are_stored(self, db: Any, tmp_path: Path) -> None:
        load([write(tmp_path, "host.yaml", HOST), write(tmp_path, "helpers.yaml", HELPERS)])

        host = AgentDefinition.objects.get(name="host")
        assert host.agents_as_tools == ["helper", "other"] and host.stream is True
        helper = AgentDefinition.objects.get(name="helper")
        assert helper.agents_as_tools == ["other"] and helper.stream is False

    def test_the_fields_default_to_none_and_no_stream(self) -> None:
        [spec] = parse(one())

        assert spec["agents_as_tools"] == [] and spec["stream"] is False

    def test_an_agent_tool_may_already_be_stored(self, db: Any, tmp_path: Path) -> None:
        load([write(tmp_path, "helpers.yaml", HELPERS)])
        load([write(tmp_path, "host.yaml", HOST)])

        assert AgentDefinition.objects.get(name="host").agents_as_tools == ["helper", "other"]

    def test_agents_may_run_each_other_as_tools(self, db: Any, tmp_path: Path) -> None:
        text = (
            "agents:\n"
            "  - {name: ping, script: [{text: hi}], agents_as_tools: [pong]}\n"
            "  - {name: pong, script: [{text: hi}], agents_as_tools: [ping]}\n"
        )
        load([write(tmp_path, "pair.yaml", text)])

        assert AgentDefinition.objects.get(name="pong").agents_as_tools == ["ping"]

    def test_an_unknown_agent_is_refused_and_nothing_is_saved(
        self, db: Any, tmp_path: Path
    ) -> None:
        path = write(tmp_path, "host.yaml", HOST)
        helper = write(
            tmp_path, "helper.yaml", "agents:\n  - {name: helper, script: [{text: hi}]}\n"
        )

        with pytest.raises(AgentFileError) as raised:
            load([path, helper])

        assert str(raised.value) == (
            f"{path}: agent 'host': agents_as_tools names unknown agent(s) ['other']; "
            "define them in the same files or load them first"
        )
        assert not AgentDefinition.objects.exists()

    def test_stream_is_accepted_for_a_claude_model(self) -> None:
        [spec] = parse(one(model="claude-sonnet-4-5", stream="false"))

        assert spec["stream"] is False


class RefusedTestCase:
    @pytest.mark.parametrize("value", ["helper", "[1]", '[""]', "{helper: 1}"])
    def test_agents_as_tools_must_be_a_list_of_names(self, value: str) -> None:
        with pytest.raises(AgentFileError) as raised:
            parse(one(agents_as_tools=value), "a.yaml")

        assert str(raised.value) == (
            "a.yaml: agent 'a': 'agents_as_tools' must be a list of agent names"
        )

    def test_an_agent_cannot_be_its_own_agent_tool(self) -> None:
        with pytest.raises(AgentFileError) as raised:
            parse(one(agents_as_tools="[b, a]"), "a.yaml")

        assert str(raised.value) == "a.yaml: agent 'a': an agent cannot be its own agent-tool"

    def test_an_agent_is_named_once(self) -> None:
        with pytest.raises(AgentFileError, match=r"agents_as_tools names \['b'\] more than once"):
            parse(one(agents_as_tools="[b, c, b]"))

    def test_a_name_a_registered_tool_has_is_refused(self) -> None:
        tools = ToolRegistry(dict(default_registry.tools))
        tools.register(Tool(name="agent__b", description="Real.", input_schema={"type": "object"}))

        with pytest.raises(AgentFileError) as raised:
            parse(one(agents_as_tools="[b, c]"), "a.yaml", tools)

        assert str(raised.value) == (
            "a.yaml: agent 'a': agents_as_tools ['b'] would be offered as ['agent__b'], which a "
            "registered tool is already named"
        )

    @pytest.mark.parametrize("fields", [{}, {"agents_as_tools": "[b]"}])
    def test_agent_tools_are_not_listed_under_tools(self, fields: dict[str, str]) -> None:
        with pytest.raises(AgentFileError) as raised:
            parse(one(tools="[displayConfirmation, agent__b]", **fields), "a.yaml")

        assert str(raised.value) == (
            "a.yaml: agent 'a': ['agent__b']: agent tools are offered from agents_as_tools; "
            "do not list them in 'tools'"
        )

    def test_a_registered_agent__tool_is_not_listed_under_tools_either(self) -> None:
        tools = ToolRegistry(dict(default_registry.tools))
        tools.register(Tool(name="agent__b", description="Real.", input_schema={"type": "object"}))

        with pytest.raises(AgentFileError, match="offered from agents_as_tools"):
            parse(one(tools="[agent__b]"), "a.yaml", tools)

    @pytest.mark.parametrize("value", ['"true"', "1", "[true]"])
    def test_stream_must_be_true_or_false(self, value: str) -> None:
        with pytest.raises(AgentFileError) as raised:
            parse(one(stream=value), "a.yaml")

        assert str(raised.value) == "a.yaml: agent 'a': 'stream' must be true or false"


def researcher_frame(task: str) -> Frame:
    spec = AgentDefinition.objects.get(name="researcher")
    return Frame(
        agent_name=spec.name,
        agent_type="agent",
        messages=[{"role": "user", "content": [{"type": "text", "text": task}]}],
        tools=spec.tools,
        max_iterations=spec.max_iterations,
        parent_tool_use_id="toolu_parent",
    )


def quick_tools() -> ToolRegistry:
    """The registry with a `pause` that does not wait, so the demo's scripts run at once."""
    tools = ToolRegistry(dict(default_registry.tools))
    pause = default_registry.get("pause")
    tools.register(dataclasses.replace(pause, func=lambda args, context: "Paused."))
    return tools


class DemoTestCase:
    def test_the_demo_file_loads_the_briefing_agents(self, db: Any) -> None:
        load([ROOT / "demo" / "agents.yaml"])

        briefing = AgentDefinition.objects.get(name="briefing")
        assert briefing.agents_as_tools == ["researcher", "summarize"] and briefing.stream
        calls = briefing.script[0]["tool_calls"]
        assert [agent_of(c["name"]) for c in calls] == ["researcher", "researcher", "summarize"]
        inputs = [input_text(c["input"]) for c in calls]
        assert inputs[0] == "overnight sales"
        assert "customer" in inputs[1] and "customer" not in inputs[0]
        researcher = AgentDefinition.objects.get(name="researcher")
        assert researcher.tools == ["screen_task", "pause", "displayConfirmation"]
        assert researcher.stream
        assert AgentDefinition.objects.get(name="summarize").tools == ["pause"]
        assert AgentDefinition.objects.get(name="slow").tools == ["pause"]

    def test_one_researcher_instance_stops_for_an_approval_and_the_other_does_not(
        self, db: Any
    ) -> None:
        load([ROOT / "demo" / "agents.yaml"])
        briefing = AgentDefinition.objects.get(name="briefing")
        script = AgentDefinition.objects.get(name="researcher").script
        sales, tickets = [input_text(c["input"]) for c in briefing.script[0]["tool_calls"][:2]]
        tools = quick_tools()

        plain = execute_turn(researcher_frame(sales), llm=ScriptedProvider(script), tools=tools)
        frame = researcher_frame(tickets)
        stopped = execute_turn(frame, llm=ScriptedProvider(script), tools=tools)

        assert plain.action == TurnAction.SEND_TEXT and plain.text.startswith("Findings:")
        assert stopped.action == TurnAction.SUSPENDED
        [call] = stopped.blocking
        approved = execute_turn(
            frame,
            llm=ScriptedProvider(script),
            tools=tools,
            decisions={call.tool_use_id: Decision(status="approved", approved=True)},
        )
        assert approved.action == TurnAction.SEND_TEXT
        assert approved.text.startswith("Findings, cleared by a reviewer")

    def test_pause_waits_and_refuses_more_than_ten_seconds(self) -> None:
        pause = default_registry.get("pause")

        assert not pause.blocking
        assert pause.run({"seconds": 0.01}, ToolContext("toolu_1", None)) == "Paused 0.01 s."
        assert pause.validate({"seconds": 10}) == {}
        assert set(pause.validate({"seconds": 11})) == {"seconds"}
        assert set(pause.validate({"seconds": 0})) == {"seconds"}
        assert set(pause.validate({})) == {"seconds"}

    def test_agent_tool_calls_in_the_demo_fit_the_input_schema(self, db: Any) -> None:
        load([ROOT / "demo" / "agents.yaml"])
        tool = make_tool(AgentSpec(name="researcher"))

        for call in AgentDefinition.objects.get(name="briefing").script[0]["tool_calls"]:
            assert tool.validate(call["input"]) == {}
