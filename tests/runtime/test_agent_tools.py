"""Agents as tools, database-free: tool names, the argument mapping and the offered tool."""

import dataclasses

import pytest

from agents.runtime import agent_tools
from agents.runtime.agent_tools import (
    INPUT_SCHEMA,
    AgentTool,
    agent_of,
    error_message,
    input_text,
    make_tool,
    tool_name,
    unknown_message,
)
from agents.runtime.subagents import AgentSpec
from agents.runtime.tools import ToolContext, ToolError


class NamesTestCase:
    def test_a_tool_is_named_after_its_agent(self) -> None:
        assert agent_tools.PREFIX == "agent__"
        assert tool_name("research") == "agent__research"

    def test_agent_of_reads_the_name_back(self) -> None:
        assert agent_of("agent__research") == "research"
        assert agent_of(tool_name("audit_research")) == "audit_research"

    @pytest.mark.parametrize("name", ["research", "displayConfirmation", "agent__", "agent_x"])
    def test_agent_of_is_none_for_other_tools(self, name: str) -> None:
        assert agent_of(name) is None

    def test_the_error_results_use_the_seeds_wording(self) -> None:
        assert unknown_message("agent__nobody") == "Unknown agent-tool: agent__nobody"
        assert error_message(RuntimeError("overloaded")) == "Error: overloaded"
        assert error_message("limit reached") == "Error: limit reached"


class InputTextTestCase:
    def test_text_is_taken_as_it_is(self) -> None:
        assert input_text({"text": "  overnight sales\n"}) == "  overnight sales\n"

    def test_text_wins_over_json(self) -> None:
        assert input_text({"text": "sales", "json": {"topic": "tickets"}}) == "sales"

    def test_a_json_object_is_dumped(self) -> None:
        assert input_text({"json": {"topic": "tickets", "days": 2}}) == (
            '{"topic": "tickets", "days": 2}'
        )

    def test_a_json_object_keeps_unicode_unescaped(self) -> None:
        assert input_text({"json": {"städt": "Zürich — 東京"}}) == '{"städt": "Zürich — 東京"}'

    @pytest.mark.parametrize(
        ("value", "expected"),
        [([1, "two"], "[1, 'two']"), ("plain", "plain"), (3, "3"), (None, "None")],
    )
    def test_json_that_is_not_an_object_is_made_text_with_str(
        self, value: object, expected: str
    ) -> None:
        assert input_text({"json": value}) == expected

    def test_text_that_is_not_a_string_falls_through_to_json(self) -> None:
        assert input_text({"text": 42, "json": {"a": 1}}) == '{"a": 1}'
        assert input_text({"text": None, "json": "b"}) == "b"

    def test_other_arguments_are_dumped_whole(self) -> None:
        assert input_text({"topic": "Ärger", "days": 2}) == '{"topic": "Ärger", "days": 2}'
        assert input_text({"text": 42}) == '{"text": 42}'

    def test_no_arguments_give_an_empty_message(self) -> None:
        assert input_text({}) == ""


class MakeToolTestCase:
    def test_the_tool_carries_the_childs_name_description_and_schema(self) -> None:
        tool = make_tool(AgentSpec(name="research", description="Looks into one topic."))

        assert isinstance(tool, AgentTool)
        assert tool.agent == "research"
        assert tool.api_schema() == {
            "name": "agent__research",
            "description": "Looks into one topic.",
            "input_schema": {
                "type": "object",
                "properties": {
                    "text": {"type": "string", "description": "Plain text input"},
                    "json": {"type": "object", "description": "Arbitrary JSON payload"},
                },
                "additionalProperties": True,
            },
        }
        assert tool.input_schema == INPUT_SCHEMA

    def test_an_agent_without_a_description_gets_one(self) -> None:
        tool = make_tool(AgentSpec(name="slow"))

        assert tool.description == "Run the agent 'slow' on a task"

    def test_the_tool_is_immediate_and_has_no_function(self) -> None:
        tool = make_tool(AgentSpec(name="research"))

        assert not tool.blocking and tool.func is None
        with pytest.raises(ToolError, match="agent__research has no implementation"):
            tool.run({"text": "x"}, ToolContext("toolu_1", None))

    def test_the_schema_lets_any_object_through(self) -> None:
        tool = make_tool(AgentSpec(name="research"))

        assert tool.validate({}) == {}
        assert tool.validate({"text": "a", "json": {"b": 1}, "extra": [1]}) == {}
        assert tool.validate({"text": 3}) == {"text": "3 is not of type 'string'"}
        assert tool.validate("plain") == {"": "arguments must be a JSON object"}

    def test_overrides_keep_it_an_agent_tool(self) -> None:
        tool = make_tool(AgentSpec(name="research")).with_overrides({"description": "Other."})

        assert isinstance(tool, AgentTool) and tool.agent == "research"
        assert dataclasses.replace(tool, name="x").agent == "research"
