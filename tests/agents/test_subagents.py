"""use_skill, use_agent and complete on their own: a scripted model, a private registry, no
database."""

import contextlib
from collections.abc import Iterator
from typing import Any

import pytest

from agents.runtime import messages as msgs
from agents.runtime import subagents
from agents.runtime.llm import ScriptedProvider
from agents.runtime.loop import execute_turn
from agents.runtime.subagents import AgentSpec, build_frame, failure_for_parent, result_for_parent
from agents.runtime.tools import ChildActivated, Tool, ToolContext, ToolError, ToolRegistry
from agents.runtime.turn import Frame, Hooks, TurnAction

AGENTS = {
    "ops": AgentSpec(name="ops", tools=["lookup"], sub_agents=["writer", "research"]),
    "writer": AgentSpec(
        name="writer",
        description="Drafts text with the user.",
        system_prompt="You write.",
        model="claude-sonnet-4-5",
        tools=["lookup", "use_skill"],
        sub_agents=["research"],
        tool_overrides={"lookup": {"description": "Look it up carefully."}},
        max_iterations=4,
        max_tokens=1024,
    ),
    "research": AgentSpec(name="research", description="Finds facts.", tools=["lookup"]),
    "loner": AgentSpec(name="loner", tools=["lookup"]),
}


def resolve(name: str) -> AgentSpec | None:
    return AGENTS.get(name)


class Bench:
    """A private registry with the sub-agent tools and a `lookup` that writes down its calls."""

    def __init__(self) -> None:
        self.calls: list[str] = []
        self.registry = ToolRegistry()
        subagents.register(self.registry)

        def lookup(args: dict[str, Any], context: ToolContext) -> str:
            self.calls.append(args["q"])
            return f"found {args['q']}"

        self.registry.register(
            Tool(
                name="lookup",
                description="Look something up.",
                input_schema={
                    "type": "object",
                    "properties": {"q": {"type": "string"}},
                    "required": ["q"],
                },
                func=lookup,
            )
        )


class ScopeLog(Hooks):
    """Writes down how each tool scope ended and which results were recorded."""

    def __init__(self) -> None:
        self.scopes: list[tuple[str, str]] = []
        self.results: list[str] = []

    @contextlib.contextmanager
    def tool_scope(
        self, frame: Frame, tool_use: dict[str, Any], runs: bool = True
    ) -> Iterator[None]:
        try:
            yield
        except BaseException as e:
            self.scopes.append((tool_use["name"], type(e).__name__))
            raise
        self.scopes.append((tool_use["name"], "ok"))

    def tool_result(
        self, frame: Frame, tool_use: dict[str, Any], content: str, is_error: bool, **extra: Any
    ) -> None:
        self.results.append(tool_use["name"])


def main_frame(name: str = "ops") -> Frame:
    return build_frame(AGENTS[name], "main", "go", resolve)


def turn(frame: Frame, script: list[dict[str, Any]], bench: Bench, **kwargs: Any) -> Any:
    return execute_turn(
        frame, llm=ScriptedProvider(script), tools=bench.registry, agents=resolve, **kwargs
    )


def offered(frame: Frame, bench: Bench) -> list[str]:
    names = list(bench.registry.effective(frame.tools, frame.tool_overrides))
    if frame.agent_type != "main":
        names.append("complete")
    return names


class OfferedToolsTestCase:
    def test_an_agent_with_sub_agents_gets_use_skill_and_use_agent_naming_them(self) -> None:
        frame = main_frame()
        assert frame.tools == ["lookup", "use_skill", "use_agent"]
        description = frame.tool_overrides["use_skill"]["description"]
        assert "- writer: Drafts text with the user." in description
        assert "- research: Finds facts." in description
        schemas = {
            t.name: t.api_schema()
            for t in Bench().registry.effective(frame.tools, frame.tool_overrides).values()
        }
        assert "- writer:" in schemas["use_agent"]["description"]

    def test_an_agent_without_sub_agents_gets_neither(self) -> None:
        assert main_frame("loner").tools == ["lookup"]

    def test_a_skill_gets_use_agent_but_not_use_skill_even_when_its_file_lists_it(self) -> None:
        frame = build_frame(AGENTS["writer"], "skill", "draft", resolve, "toolu_1")
        assert frame.tools == ["lookup", "use_agent"]
        assert frame.tool_overrides["lookup"] == {"description": "Look it up carefully."}

    def test_complete_is_offered_to_sub_agents_only(self) -> None:
        bench = Bench()
        child = build_frame(AGENTS["research"], "agent", "find", resolve, "toolu_1")
        assert "complete" in offered(child, bench)
        assert "complete" not in offered(main_frame(), bench)

    def test_a_sub_agent_frame_without_its_parent_call_is_a_programming_error(self) -> None:
        with pytest.raises(AssertionError):
            build_frame(AGENTS["research"], "agent", "find", resolve)


class UseSkillTestCase:
    def call(
        self, tool_name: str, caller: Frame, args: dict[str, Any], agents: Any = resolve
    ) -> Any:
        tool = Bench().registry.get(tool_name)
        return tool.run(args, ToolContext("toolu_parent", caller, run=None, agents=agents))

    def test_it_raises_child_activated_with_the_child_frame(self) -> None:
        with pytest.raises(ChildActivated) as raised:
            self.call("use_skill", main_frame(), {"name": "writer", "message": "Draft the notes"})
        child = raised.value.child_frame
        assert child.agent_name == "writer" and child.agent_type == "skill"
        assert child.messages == [
            {"role": "user", "content": [{"type": "text", "text": "Draft the notes"}]}
        ]
        assert child.system_prompt == "You write." and child.model == "claude-sonnet-4-5"
        assert child.tools == ["lookup", "use_agent"]
        assert child.max_iterations == 4 and child.max_tokens == 1024
        assert child.parent_tool_use_id == "toolu_parent"
        assert child.iteration == 0

    def test_use_agent_makes_an_agent_frame(self) -> None:
        with pytest.raises(ChildActivated) as raised:
            self.call("use_agent", main_frame(), {"name": "research", "message": "Find it"})
        assert raised.value.child_frame.agent_type == "agent"

    def test_child_activated_passes_through_except_exception(self) -> None:
        caught = "nothing"
        try:
            try:
                self.call("use_skill", main_frame(), {"name": "writer", "message": "x"})
            except Exception:
                caught = "Exception"
        except ChildActivated:
            caught = "ChildActivated"
        assert caught == "ChildActivated"

    def test_it_refuses_an_agent_that_is_not_a_sub_agent(self) -> None:
        with pytest.raises(
            ToolError, match="'loner' is not a sub-agent of 'ops'.*writer, research"
        ):
            self.call("use_agent", main_frame(), {"name": "loner", "message": "x"})

    def test_a_skill_cannot_use_a_skill(self) -> None:
        skill = build_frame(AGENTS["writer"], "skill", "draft", resolve, "toolu_1")
        with pytest.raises(ToolError, match="A skill cannot use another skill"):
            self.call("use_skill", skill, {"name": "research", "message": "x"})

    def test_an_agent_cannot_invoke_itself(self) -> None:
        with pytest.raises(ToolError, match="'ops' cannot invoke itself"):
            self.call("use_agent", main_frame(), {"name": "ops", "message": "x"})

    def test_without_a_resolver_it_says_sub_agents_are_unavailable(self) -> None:
        with pytest.raises(ToolError, match="not available"):
            self.call("use_agent", main_frame(), {"name": "research", "message": "x"}, agents=None)


class ExecuteTurnTestCase:
    def test_a_child_call_leaves_the_parent_call_unresolved_and_earlier_results_kept(self) -> None:
        bench, hooks = Bench(), ScopeLog()
        frame = main_frame()
        result = turn(
            frame,
            [
                {
                    "tool_calls": [
                        {"name": "lookup", "input": {"q": "a"}},
                        {"name": "use_skill", "input": {"name": "writer", "message": "Draft"}},
                        {"name": "lookup", "input": {"q": "b"}},
                    ]
                }
            ],
            bench,
            hooks=hooks,
        )
        assert result.action == TurnAction.CHILD_ACTIVATED
        use_skill = msgs.tool_uses(frame.messages[1]["content"])[1]
        assert result.child_frame.parent_tool_use_id == use_skill["id"]
        # The scope of use_skill ended by the signal (the engine's transaction rolls back) and
        # recorded no result; the parent's call waits for the child.
        assert hooks.scopes == [("lookup", "ok"), ("use_skill", "ChildActivated")]
        assert hooks.results == ["lookup"]
        assert [u["name"] for u in msgs.unresolved_tool_uses(frame.messages)] == [
            "use_skill",
            "lookup",
        ]
        assert bench.calls == ["a"]

    def test_the_parent_resumes_with_the_child_result_and_runs_only_the_rest(self) -> None:
        bench = Bench()
        frame = main_frame()
        script = [
            {
                "tool_calls": [
                    {"name": "lookup", "input": {"q": "a"}},
                    {"name": "use_skill", "input": {"name": "writer", "message": "Draft"}},
                    {"name": "lookup", "input": {"q": "b"}},
                ]
            },
            {
                "tool_calls": [
                    {"name": "use_agent", "input": {"name": "research", "message": "More"}}
                ]
            },
        ]
        first = turn(frame, script, bench)
        parent_result = result_for_parent(first.child_frame, "the draft", False)
        second = turn(frame, script, bench, tool_result=parent_result)
        # The rest of the first message ran once, then the model was called again and spawned
        # another child.
        assert bench.calls == ["a", "b"]
        assert second.action == TurnAction.CHILD_ACTIVATED
        assert second.child_frame.agent_name == "research"
        results = [b for b in msgs.blocks(frame.messages[2]) if b["type"] == "tool_result"]
        assert [r["content"] for r in results] == ["found a", "the draft", "found b"]

    def test_complete_ends_a_sub_agent_turn_with_its_result(self) -> None:
        child = build_frame(AGENTS["research"], "agent", "find", resolve, "toolu_1")
        result = turn(
            child, [{"tool_calls": [{"name": "complete", "input": {"result": "42"}}]}], Bench()
        )
        assert result.action == TurnAction.COMPLETE and result.text == "42"
        assert result_for_parent(child, result.text, False) == ("toolu_1", "42", False)

    def test_complete_from_the_main_agent_is_an_unknown_tool(self) -> None:
        frame = main_frame()
        result = turn(
            frame,
            [{"tool_calls": [{"name": "complete", "input": {"result": "42"}}]}, {"text": "ok"}],
            Bench(),
        )
        assert result.action == TurnAction.SEND_TEXT
        [block] = msgs.blocks(frame.messages[2])
        assert block["is_error"] and "Unknown tool 'complete'" in block["content"]

    def test_a_refused_child_call_is_an_error_result_and_the_model_decides_next(self) -> None:
        frame = main_frame()
        script = [
            {"tool_calls": [{"name": "use_agent", "input": {"name": "loner", "message": "x"}}]},
            {"text": "went on", "if_error": {"text": "I cannot call loner."}},
        ]
        result = turn(frame, script, Bench())
        assert result.action == TurnAction.SEND_TEXT and result.text == "I cannot call loner."

    def test_a_skill_calling_use_skill_gets_an_error_and_no_child(self) -> None:
        skill = build_frame(AGENTS["writer"], "skill", "draft", resolve, "toolu_1")
        script = [
            {"tool_calls": [{"name": "use_skill", "input": {"name": "research", "message": "x"}}]},
            {"text": "ok"},
        ]
        result = turn(skill, script, Bench())
        assert result.action == TurnAction.SEND_TEXT
        [block] = msgs.blocks(skill.messages[2])
        assert block["is_error"]

    def test_the_iteration_limit_and_a_model_error_read_clearly_in_the_parent(self) -> None:
        child = build_frame(AGENTS["writer"], "skill", "draft", resolve, "toolu_1")
        looping = [{"tool_calls": [{"name": "lookup", "input": {"q": str(i)}}]} for i in range(9)]
        limit = turn(child, looping, Bench())
        assert limit.action == TurnAction.MAX_ITERATIONS
        message = failure_for_parent(child, limit.text)
        assert message.startswith("The skill 'writer' failed and was closed: ")
        assert "limit of 4 model calls" in message

        broken = build_frame(AGENTS["research"], "agent", "find", resolve, "toolu_2")
        error = turn(broken, [{"error": "overloaded"}], Bench())
        assert error.action == TurnAction.ERROR
        assert failure_for_parent(broken, error.text) == (
            "The agent 'research' failed and was closed: overloaded"
        )

    def test_a_child_without_a_parent_call_cannot_hand_back_a_result(self) -> None:
        orphan = Frame(agent_name="research", agent_type="agent", messages=[])
        with pytest.raises(AssertionError, match="without a parent_tool_use_id"):
            result_for_parent(orphan, "42", False)
