"""execute_turn on its own: a scripted model, a private tool registry, no database."""

import copy
import json
from typing import Any

from agents.runtime import messages as msgs
from agents.runtime.llm import LLMRequest, LLMResponse, ScriptedProvider
from agents.runtime.loop import execute_turn
from agents.runtime.tools import (
    BLOCKING,
    INPUT,
    ChildActivated,
    Tool,
    ToolContext,
    ToolError,
    ToolRegistry,
)
from agents.runtime.turn import Decision, Frame, Hooks, TurnAction

ACCOUNT = {
    "type": "object",
    "properties": {"account": {"type": "string", "minLength": 1}},
    "required": ["account"],
    "additionalProperties": False,
}
TRANSFER = {
    "type": "object",
    "properties": {"to": {"type": "string"}, "amount": {"type": "number", "exclusiveMinimum": 0}},
    "required": ["to", "amount"],
}


class Workbench:
    """A private registry whose tools write down every call, in order."""

    def __init__(self) -> None:
        self.calls: list[tuple[str, dict[str, Any]]] = []
        self.registry = ToolRegistry()
        for name in ("lookup", "audit"):
            self._add(name, ACCOUNT)
        for name in ("transfer", "refund"):
            self._add(name, TRANSFER, execution_mode=BLOCKING, timeout=60)
        self.registry.register(
            Tool(
                name="displayConfirmation",
                description="Ask a reviewer.",
                input_schema={
                    "type": "object",
                    "properties": {"action": {"type": "string"}},
                    "required": ["action"],
                },
                execution_mode=BLOCKING,
            )
        )
        self.registry.register(
            Tool(
                name="ask_user",
                description="Ask the user.",
                input_schema={
                    "type": "object",
                    "properties": {"question": {"type": "string"}},
                    "required": ["question"],
                },
                execution_mode=BLOCKING,
                kind=INPUT,
            )
        )

        @self.registry.tool("explode", description="Fails.", input_schema={"type": "object"})
        def explode(args: dict[str, Any], context: ToolContext) -> str:
            self.calls.append(("explode", args))
            raise RuntimeError("disk on fire")

        @self.registry.tool("refuse", description="Says no.", input_schema={"type": "object"})
        def refuse(args: dict[str, Any], context: ToolContext) -> str:
            self.calls.append(("refuse", args))
            raise ToolError("Account ACC-9 is frozen; nothing was changed.")

    def _add(self, name: str, schema: dict[str, Any], **options: Any) -> None:
        def func(args: dict[str, Any], context: ToolContext) -> dict[str, Any]:
            self.calls.append((name, args))
            return {"tool": name, "ok": True, "tool_use_id": context.tool_use_id}

        self.registry.register(
            Tool(
                name=name,
                description=f"The {name} tool.",
                input_schema=schema,
                func=func,
                **options,
            )
        )

    def names(self) -> list[str]:
        return [name for name, _ in self.calls]


class Recorder:
    """Wraps a provider and keeps a copy of every request it was sent."""

    def __init__(self, script: list[dict[str, Any]]) -> None:
        self.provider = ScriptedProvider(script)
        self.requests: list[LLMRequest] = []

    def complete(self, request: LLMRequest) -> LLMResponse:
        self.requests.append(copy.deepcopy(request))
        return self.provider.complete(request)


def make_frame(tools: list[str], **options: Any) -> Frame:
    return Frame(
        agent_name="clerk",
        agent_type="main",
        messages=[{"role": "user", "content": [{"type": "text", "text": "Please help."}]}],
        tools=tools,
        **options,
    )


def stored(frame: Frame) -> Frame:
    """The frame as another process would load it: its messages round-tripped through JSON."""
    return Frame(**{**frame.__dict__, "messages": json.loads(json.dumps(frame.messages))})


def results(frame: Frame) -> list[dict[str, Any]]:
    """Every tool_result block of the conversation, in order."""
    return [
        b
        for m in frame.messages
        if m["role"] == "user"
        for b in msgs.blocks(m)
        if b["type"] == "tool_result"
    ]


def tool_use_ids(frame: Frame) -> dict[str, list[str]]:
    ids: dict[str, list[str]] = {}
    for m in frame.messages:
        if m["role"] == "assistant":
            for use in msgs.tool_uses(msgs.blocks(m)):
                ids.setdefault(use["name"], []).append(use["id"])
    return ids


def call(name: str, **args: Any) -> dict[str, Any]:
    return {"name": name, "input": args}


class TextTestCase:
    def test_it_sends_text_when_the_model_only_talks(self) -> None:
        bench = Workbench()
        frame = make_frame(["lookup"])
        llm = Recorder([{"text": "Hello, how can I help?"}])

        result = execute_turn(frame, llm=llm, tools=bench.registry)

        assert result.action == TurnAction.SEND_TEXT
        assert result.text == "Hello, how can I help?"
        assert frame.messages[-1] == {
            "role": "assistant",
            "content": [{"type": "text", "text": "Hello, how can I help?"}],
        }
        assert frame.iteration == 1
        assert bench.calls == []
        assert [t["name"] for t in llm.requests[0].tools] == ["lookup"]
        assert llm.requests[0].tools[0]["input_schema"] == ACCOUNT

    def test_a_user_message_is_added_and_restarts_the_iteration_count(self) -> None:
        frame = make_frame([], iteration=7, max_iterations=8)
        frame.messages.append(
            {"role": "assistant", "content": [{"type": "text", "text": "Which?"}]}
        )
        llm = Recorder([{"text": "Which?"}, {"text": "Staging it is."}])

        result = execute_turn(frame, llm=llm, tools=Workbench().registry, user_message="staging")

        assert result.action == TurnAction.SEND_TEXT
        assert result.text == "Staging it is."
        assert llm.requests[0].messages[-1] == {
            "role": "user",
            "content": [{"type": "text", "text": "staging"}],
        }
        assert frame.iteration == 1


class ImmediateToolsTestCase:
    def test_a_tool_result_is_fed_back_to_the_model(self) -> None:
        bench = Workbench()
        frame = make_frame(["lookup"])
        llm = Recorder(
            [
                {"text": "Let me look.", "tool_calls": [call("lookup", account="ACC-1")]},
                {"text": "The account is fine."},
            ]
        )

        result = execute_turn(frame, llm=llm, tools=bench.registry)

        assert result.action == TurnAction.SEND_TEXT
        assert result.text == "The account is fine."
        assert bench.calls == [("lookup", {"account": "ACC-1"})]
        [use_id] = tool_use_ids(frame)["lookup"]
        fed_back = llm.requests[1].messages[-1]
        assert fed_back["role"] == "user"
        [block] = fed_back["content"]
        assert block["type"] == "tool_result"
        assert block["tool_use_id"] == use_id
        assert json.loads(block["content"]) == {"tool": "lookup", "ok": True, "tool_use_id": use_id}
        assert "is_error" not in block
        assert frame.iteration == 2

    def test_several_tools_of_one_message_run_in_order_and_answer_in_one_message(self) -> None:
        bench = Workbench()
        frame = make_frame(["lookup", "audit"])
        llm = Recorder(
            [
                {
                    "tool_calls": [
                        call("audit", account="ACC-3"),
                        call("lookup", account="ACC-1"),
                        call("lookup", account="ACC-2"),
                    ]
                },
                {"text": "All three checked."},
            ]
        )

        result = execute_turn(frame, llm=llm, tools=bench.registry)

        assert result.action == TurnAction.SEND_TEXT
        assert bench.calls == [
            ("audit", {"account": "ACC-3"}),
            ("lookup", {"account": "ACC-1"}),
            ("lookup", {"account": "ACC-2"}),
        ]
        answer = llm.requests[1].messages[-1]["content"]
        asked = msgs.tool_uses(llm.requests[1].messages[-2]["content"])
        assert [b["tool_use_id"] for b in answer] == [u["id"] for u in asked]

    def test_an_unknown_tool_gives_an_error_result_and_the_loop_goes_on(self) -> None:
        bench = Workbench()
        frame = make_frame(["lookup"])
        llm = Recorder(
            [
                {"tool_calls": [call("drop_database"), call("lookup", account="ACC-1")]},
                {"text": "I could not drop it."},
            ]
        )

        result = execute_turn(frame, llm=llm, tools=bench.registry)

        assert result.action == TurnAction.SEND_TEXT
        assert result.text == "I could not drop it."
        unknown, looked_up = results(frame)
        assert unknown["is_error"] is True
        assert unknown["content"] == "Unknown tool 'drop_database'."
        assert "is_error" not in looked_up
        assert bench.names() == ["lookup"]

    def test_a_registered_tool_the_agent_was_not_given_is_unknown_to_it(self) -> None:
        bench = Workbench()
        frame = make_frame(["lookup"])
        llm = Recorder([{"tool_calls": [call("audit", account="ACC-1")]}, {"text": "No."}])

        execute_turn(frame, llm=llm, tools=bench.registry)

        [result] = results(frame)
        assert result["is_error"] is True
        assert result["content"] == "Unknown tool 'audit'."
        assert bench.calls == []

    def test_a_tool_that_raises_gives_an_error_result_and_the_loop_goes_on(self) -> None:
        bench = Workbench()
        frame = make_frame(["explode", "lookup"])
        llm = Recorder(
            [
                {"tool_calls": [call("explode"), call("lookup", account="ACC-1")]},
                {"text": "The first tool broke."},
            ]
        )

        result = execute_turn(frame, llm=llm, tools=bench.registry)

        assert result.action == TurnAction.SEND_TEXT
        exploded, looked_up = results(frame)
        assert exploded["is_error"] is True
        assert exploded["content"] == "Tool explode failed: RuntimeError: disk on fire"
        assert "is_error" not in looked_up
        assert bench.names() == ["explode", "lookup"]

    def test_a_tool_error_message_reaches_the_model_as_it_is(self) -> None:
        bench = Workbench()
        frame = make_frame(["refuse"])
        llm = Recorder([{"tool_calls": [call("refuse")]}, {"text": "It is frozen."}])

        result = execute_turn(frame, llm=llm, tools=bench.registry)

        assert result.action == TurnAction.SEND_TEXT
        [refused] = results(frame)
        assert refused["is_error"] is True
        assert refused["content"] == "Account ACC-9 is frozen; nothing was changed."

    def test_input_that_fails_the_schema_gives_an_error_result_and_the_tool_does_not_run(
        self,
    ) -> None:
        bench = Workbench()
        frame = make_frame(["lookup"])
        llm = Recorder(
            [
                {"tool_calls": [call("lookup", account="", extra=1), call("lookup")]},
                {"text": "I sent bad input."},
            ]
        )

        result = execute_turn(frame, llm=llm, tools=bench.registry)

        assert result.action == TurnAction.SEND_TEXT
        short, missing = results(frame)
        assert short["is_error"] is True
        assert short["content"].startswith("Invalid input for lookup: ")
        assert "account:" in short["content"] and "extra" in short["content"]
        assert missing["is_error"] is True
        assert "account: 'account' is a required property" in missing["content"]
        assert bench.calls == []

    def test_the_iteration_limit_stops_the_loop_with_a_clear_message(self) -> None:
        bench = Workbench()
        frame = make_frame(["lookup"], max_iterations=3)
        llm = Recorder([{"tool_calls": [call("lookup", account=f"ACC-{n}")]} for n in range(10)])

        result = execute_turn(frame, llm=llm, tools=bench.registry)

        assert result.action == TurnAction.MAX_ITERATIONS
        assert result.text == (
            "Agent 'clerk' stopped: it reached its limit of 3 model calls without finishing."
        )
        assert len(llm.requests) == 3
        assert bench.names() == ["lookup"] * 3

    def test_hooks_see_each_answer_and_each_result_inside_the_tool_scope(self) -> None:
        seen: list[str] = []

        class Watcher(Hooks):
            def llm_responded(self, frame: Frame, response: LLMResponse) -> None:
                seen.append(
                    "answer:" + ",".join(u["name"] for u in msgs.tool_uses(response.content))
                )

            def tool_scope(self, frame: Frame, tool_use: dict[str, Any], runs: bool = True) -> Any:
                seen.append(f"open:{tool_use['name']}")
                return super().tool_scope(frame, tool_use, runs)

            def tool_result(
                self,
                frame: Frame,
                tool_use: dict[str, Any],
                content: str,
                is_error: bool,
                **extra: Any,
            ) -> None:
                seen.append(f"result:{tool_use['name']}:{is_error}")

        frame = make_frame(["lookup"])
        llm = Recorder(
            [{"tool_calls": [call("lookup", account="A"), call("nope")]}, {"text": "ok"}]
        )

        execute_turn(frame, llm=llm, tools=Workbench().registry, hooks=Watcher())

        assert seen == [
            "answer:lookup,nope",
            "open:lookup",
            "result:lookup:False",
            "open:nope",
            "result:nope:True",
            "answer:",
        ]


MIXED = [
    {
        "text": "First a lookup, then two payments.",
        "tool_calls": [
            call("lookup", account="A"),
            call("transfer", to="B", amount=10),
            call("audit", account="C"),
            call("refund", to="D", amount=5),
        ],
    },
    {"text": "Done.", "if_error": {"text": "Something was refused."}},
]


class BlockingTestCase:
    def suspend(self, bench: Workbench) -> tuple[Frame, Any]:
        frame = make_frame(["lookup", "audit", "transfer", "refund"])
        result = execute_turn(frame, llm=ScriptedProvider(MIXED), tools=bench.registry)
        return frame, result

    def test_blocking_calls_of_one_message_are_raised_as_one_group(self) -> None:
        bench = Workbench()

        frame, result = self.suspend(bench)

        assert result.action == TurnAction.SUSPENDED
        ids = tool_use_ids(frame)
        assert [c.tool_use_id for c in result.blocking] == [ids["transfer"][0], ids["refund"][0]]
        assert [c.tool.name for c in result.blocking] == ["transfer", "refund"]
        assert [c.input for c in result.blocking] == [
            {"to": "B", "amount": 10},
            {"to": "D", "amount": 5},
        ]
        assert result.blocking[0].preceding_text == "First a lookup, then two payments."
        assert result.blocking[0].tool.timeout == 60
        # Only the immediate call before the first blocking one ran; the rest waits its turn.
        assert bench.calls == [("lookup", {"account": "A"})]
        assert [r["tool_use_id"] for r in results(frame)] == [ids["lookup"][0]]

    def test_resuming_runs_the_rest_in_order_and_never_reruns_a_tool(self) -> None:
        bench = Workbench()
        frame, _ = self.suspend(bench)
        ids = tool_use_ids(frame)
        decisions = {
            ids["transfer"][0]: Decision(
                "approved", True, modified_args={"to": "B", "amount": 7}, decided_by="alice"
            ),
            ids["refund"][0]: Decision("approved", True, decided_by="bob"),
        }
        llm = Recorder(MIXED)

        result = execute_turn(stored(frame), llm=llm, tools=bench.registry, decisions=decisions)

        assert result.action == TurnAction.SEND_TEXT
        assert result.text == "Done."
        assert bench.calls == [
            ("lookup", {"account": "A"}),
            ("transfer", {"to": "B", "amount": 7}),
            ("audit", {"account": "C"}),
            ("refund", {"to": "D", "amount": 5}),
        ]
        # One model call on resume: the tools answered without asking the model again.
        [request] = llm.requests
        answers = request.messages[-1]["content"]
        assert [a["tool_use_id"] for a in answers] == [
            ids["lookup"][0],
            ids["transfer"][0],
            ids["audit"][0],
            ids["refund"][0],
        ]
        assert answers[1]["content"].startswith(
            "Note: alice edited the arguments before approving; "
            'it ran with {"to": "B", "amount": 7}.'
        )

    def test_resuming_again_after_everything_ran_runs_nothing(self) -> None:
        bench = Workbench()
        frame, _ = self.suspend(bench)
        ids = tool_use_ids(frame)
        decisions = {
            ids["transfer"][0]: Decision("approved", True, decided_by="alice"),
            ids["refund"][0]: Decision("approved", True, decided_by="alice"),
        }
        execute_turn(frame, llm=ScriptedProvider(MIXED), tools=bench.registry, decisions=decisions)
        ran = list(bench.calls)

        result = execute_turn(
            stored(frame),
            llm=ScriptedProvider(MIXED + [{"text": "Anything else?"}]),
            tools=bench.registry,
            decisions=decisions,
            user_message="thanks",
        )

        assert result.text == "Anything else?"
        assert bench.calls == ran

    def test_a_rejection_names_the_reviewer_and_the_reason_and_the_tool_does_not_run(self) -> None:
        bench = Workbench()
        frame, _ = self.suspend(bench)
        ids = tool_use_ids(frame)
        decisions = {
            ids["transfer"][0]: Decision(
                "rejected", False, reason="wrong supplier", decided_by="alice"
            ),
            ids["refund"][0]: Decision("approved", True, decided_by="alice"),
        }

        result = execute_turn(
            frame, llm=ScriptedProvider(MIXED), tools=bench.registry, decisions=decisions
        )

        rejected = next(r for r in results(frame) if r["tool_use_id"] == ids["transfer"][0])
        assert rejected["is_error"] is True
        assert rejected["content"] == "Rejected by alice: wrong supplier. transfer did not run."
        assert bench.names() == ["lookup", "audit", "refund"]
        # The script's if_error branch: the model saw the rejection.
        assert result.text == "Something was refused."

    def test_a_rejection_without_a_reason_says_so(self) -> None:
        bench = Workbench()
        frame, _ = self.suspend(bench)
        ids = tool_use_ids(frame)
        decisions = {
            i[0]: Decision("rejected", False, decided_by="bob")
            for i in (ids["transfer"], ids["refund"])
        }

        execute_turn(frame, llm=ScriptedProvider(MIXED), tools=bench.registry, decisions=decisions)

        rejected = next(r for r in results(frame) if r["tool_use_id"] == ids["refund"][0])
        assert rejected["content"] == "Rejected by bob: no reason given. refund did not run."

    def test_a_timeout_rejects_by_default_and_approves_when_the_tool_says_so(self) -> None:
        bench = Workbench()
        frame, _ = self.suspend(bench)
        ids = tool_use_ids(frame)
        decisions = {
            ids["transfer"][0]: Decision("timed_out", False),
            ids["refund"][0]: Decision("timed_out", True),  # its on_timeout was approve
        }

        execute_turn(frame, llm=ScriptedProvider(MIXED), tools=bench.registry, decisions=decisions)

        timed_out = next(r for r in results(frame) if r["tool_use_id"] == ids["transfer"][0])
        assert timed_out["is_error"] is True
        assert timed_out["content"] == (
            "No reviewer decided on transfer within 60 seconds; "
            "the call was rejected automatically."
        )
        assert bench.names() == ["lookup", "audit", "refund"]

    def test_a_cancelled_call_does_not_run(self) -> None:
        bench = Workbench()
        frame, _ = self.suspend(bench)
        ids = tool_use_ids(frame)
        decisions = {
            i[0]: Decision("cancelled", False, decided_by="carol")
            for i in (ids["transfer"], ids["refund"])
        }

        execute_turn(frame, llm=ScriptedProvider(MIXED), tools=bench.registry, decisions=decisions)

        cancelled = next(r for r in results(frame) if r["tool_use_id"] == ids["transfer"][0])
        assert cancelled == {
            "type": "tool_result",
            "tool_use_id": ids["transfer"][0],
            "is_error": True,
            "content": "The run was cancelled by carol; transfer did not run.",
        }
        assert bench.names() == ["lookup", "audit"]

    def test_a_partial_decision_runs_up_to_the_next_undecided_call(self) -> None:
        bench = Workbench()
        frame, _ = self.suspend(bench)
        ids = tool_use_ids(frame)
        decisions = {ids["transfer"][0]: Decision("approved", True, decided_by="alice")}

        result = execute_turn(
            frame, llm=ScriptedProvider(MIXED), tools=bench.registry, decisions=decisions
        )

        assert result.action == TurnAction.SUSPENDED
        assert [c.tool_use_id for c in result.blocking] == [ids["refund"][0]]
        assert bench.names() == ["lookup", "transfer", "audit"]

    def test_a_blocking_call_with_invalid_input_is_answered_with_an_error_not_raised(self) -> None:
        bench = Workbench()
        frame = make_frame(["transfer"])
        llm = Recorder(
            [
                {
                    "tool_calls": [
                        call("transfer", to="B", amount=-5),
                        call("transfer", to="C", amount=1),
                    ]
                },
                {"text": "unused"},
            ]
        )

        result = execute_turn(frame, llm=llm, tools=bench.registry)

        assert result.action == TurnAction.SUSPENDED
        assert [c.input for c in result.blocking] == [{"to": "C", "amount": 1}]
        [invalid] = results(frame)
        assert invalid["is_error"] is True
        assert invalid["content"].startswith("Invalid input for transfer: amount: ")

    def test_approved_arguments_that_fail_the_schema_do_not_run(self) -> None:
        bench = Workbench()
        frame = make_frame(["transfer"])
        script = [{"tool_calls": [call("transfer", to="B", amount=5)]}, {"text": "ok"}]
        execute_turn(frame, llm=ScriptedProvider(script), tools=bench.registry)
        [use_id] = tool_use_ids(frame)["transfer"]
        decisions = {use_id: Decision("approved", True, modified_args={"to": "B"}, decided_by="al")}

        execute_turn(frame, llm=ScriptedProvider(script), tools=bench.registry, decisions=decisions)

        [result] = results(frame)
        assert result["is_error"] is True
        assert "amount: 'amount' is a required property" in result["content"]
        assert bench.calls == []

    def test_an_approved_confirmation_returns_the_decision(self) -> None:
        bench = Workbench()
        frame = make_frame(["displayConfirmation"])
        script = [
            {"text": "May I?", "tool_calls": [call("displayConfirmation", action="Delete 5 rows")]},
            {"text": "Deleted."},
        ]
        first = execute_turn(frame, llm=ScriptedProvider(script), tools=bench.registry)
        assert first.action == TurnAction.SUSPENDED
        assert first.blocking[0].preceding_text == "May I?"
        [use_id] = tool_use_ids(frame)["displayConfirmation"]
        decisions = {use_id: Decision("approved", True, reason="looks right", decided_by="alice")}

        result = execute_turn(
            frame, llm=ScriptedProvider(script), tools=bench.registry, decisions=decisions
        )

        assert result.text == "Deleted."
        [answer] = results(frame)
        assert "is_error" not in answer
        assert json.loads(answer["content"]) == {
            "approved": True,
            "decided_by": "alice",
            "reason": "looks right",
        }

    def test_a_confirmation_approved_with_edits_tells_the_model_what_was_approved(self) -> None:
        bench = Workbench()
        frame = make_frame(["displayConfirmation"])
        script = [
            {"tool_calls": [call("displayConfirmation", action="Delete 500 rows")]},
            {"text": "Deleted 100."},
        ]
        execute_turn(frame, llm=ScriptedProvider(script), tools=bench.registry)
        [use_id] = tool_use_ids(frame)["displayConfirmation"]
        edited = {"action": "Delete 100 rows"}
        decisions = {use_id: Decision("approved", True, modified_args=edited, decided_by="bob")}

        execute_turn(frame, llm=ScriptedProvider(script), tools=bench.registry, decisions=decisions)

        [answer] = results(frame)
        assert json.loads(answer["content"]) == {
            "approved": True,
            "decided_by": "bob",
            "modifiedArgs": {"action": "Delete 100 rows"},
        }

    def test_ask_user_returns_the_answer(self) -> None:
        bench = Workbench()
        frame = make_frame(["ask_user"])
        script = [
            {"tool_calls": [call("ask_user", question="Staging or production?")]},
            {"text": "Restarting staging."},
        ]
        first = execute_turn(frame, llm=ScriptedProvider(script), tools=bench.registry)
        assert first.action == TurnAction.SUSPENDED
        assert first.blocking[0].tool.kind == INPUT
        [use_id] = tool_use_ids(frame)["ask_user"]
        decisions = {use_id: Decision("approved", True, response="staging", decided_by="alice")}

        result = execute_turn(
            frame, llm=ScriptedProvider(script), tools=bench.registry, decisions=decisions
        )

        assert result.text == "Restarting staging."
        [answer] = results(frame)
        assert answer == {"type": "tool_result", "tool_use_id": use_id, "content": "staging"}


class SignalsTestCase:
    def test_a_child_activated_by_a_tool_passes_through_its_except_exception(self) -> None:
        bench = Workbench()
        child = Frame(
            agent_name="researcher",
            agent_type="agent",
            messages=[],
            parent_tool_use_id="toolu_parent",
        )

        @bench.registry.tool(
            "delegate", description="Starts a sub-agent.", input_schema={"type": "object"}
        )
        def delegate(args: dict[str, Any], context: ToolContext) -> str:
            try:
                raise ChildActivated(child)
            except Exception:
                return "swallowed"

        frame = make_frame(["delegate", "lookup"])
        script = [{"tool_calls": [call("delegate"), call("lookup", account="A")]}]

        result = execute_turn(frame, llm=ScriptedProvider(script), tools=bench.registry)

        assert result.action == TurnAction.CHILD_ACTIVATED
        assert result.child_frame is child
        # The delegating call waits for the child's result; nothing after it ran yet.
        assert results(frame) == []
        assert bench.calls == []

    def test_an_llm_error_ends_the_turn_with_its_message(self) -> None:
        frame = make_frame([])
        result = execute_turn(
            frame,
            llm=ScriptedProvider([{"error": "The model is down."}]),
            tools=Workbench().registry,
        )

        assert result.action == TurnAction.ERROR
        assert result.text == "The model is down."

    def test_a_script_that_runs_out_of_turns_is_an_error_naming_the_turn(self) -> None:
        frame = make_frame([])
        frame.messages.append({"role": "assistant", "content": [{"type": "text", "text": "Hi"}]})

        result = execute_turn(
            frame,
            llm=ScriptedProvider([{"text": "Hi"}]),
            tools=Workbench().registry,
            user_message="more",
        )

        assert result.action == TurnAction.ERROR
        assert result.text == "The script of agent 'clerk' has no turn 2 (it has 1)."

    def test_the_if_error_branch_plays_only_after_an_error_result(self) -> None:
        script = [
            {"tool_calls": [call("lookup", account="A")]},
            {"text": "Found it.", "if_error": {"text": "It failed."}},
        ]
        fine = execute_turn(
            make_frame(["lookup"]), llm=ScriptedProvider(script), tools=Workbench().registry
        )
        broken = execute_turn(
            make_frame(["lookup"]),
            llm=ScriptedProvider([{"tool_calls": [call("lookup")]}, script[1]]),
            tools=Workbench().registry,
        )

        assert fine.text == "Found it."
        assert broken.text == "It failed."

    def test_an_if_error_branch_can_fail_the_turn(self) -> None:
        script = [
            {"tool_calls": [call("lookup")]},
            {"text": "Found it.", "if_error": {"error": "Giving up after a bad lookup."}},
        ]
        result = execute_turn(
            make_frame(["lookup"]), llm=ScriptedProvider(script), tools=Workbench().registry
        )

        assert result.action == TurnAction.ERROR
        assert result.text == "Giving up after a bad lookup."
