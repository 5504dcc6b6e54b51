"""The anthropic provider through the real SDK, answered by an injected HTTP transport.

The transport returns Messages API payloads as the API sends them (messages, tool_use blocks,
stop reasons, error bodies with their status codes), so the SDK's parsing and its own retries
run as they do in production.
"""

import json
from collections.abc import Callable
from typing import Any

import httpx2
import pytest

from agents import decisions, starting
from agents.engine import Engine
from agents.models import AgentDefinition, Event, StackFrame, Suspension, Thread
from agents.runtime import messages as msgs
from agents.runtime.llm import AnthropicProvider, LLMError, LLMRequest
from agents.runtime.loop import execute_turn
from agents.runtime.tools import BLOCKING, Tool, ToolContext, ToolRegistry
from agents.runtime.turn import Decision, Frame, TurnAction

MODEL = "claude-opus-4-6"
FAST_RETRY = {"retry-after-ms": "1"}  # the SDK waits what the API asks, so retries are quick


def message(content: list[dict[str, Any]], stop_reason: str, **extra: Any) -> dict[str, Any]:
    """A Messages API response body."""
    return {
        "id": "msg_01XFDUDYJgAACzvnptvVoYEL",
        "type": "message",
        "role": "assistant",
        "model": MODEL,
        "content": content,
        "stop_reason": stop_reason,
        "stop_sequence": None,
        "usage": {"input_tokens": 412, "output_tokens": 88},
        **extra,
    }


def text(said: str) -> dict[str, Any]:
    return {"type": "text", "text": said}


def tool_use(use_id: str, name: str, **args: Any) -> dict[str, Any]:
    return {"type": "tool_use", "id": use_id, "name": name, "input": args}


def error(
    status: int, kind: str, said: str, headers: dict[str, str] | None = None
) -> httpx2.Response:
    body = {
        "type": "error",
        "error": {"type": kind, "message": said},
        "request_id": "req_011CSHoEeqs5C35K2UUqR7Fy",
    }
    return httpx2.Response(
        status, json=body, headers={"request-id": "req_011CSHoEeqs5C35K2UUqR7Fy", **(headers or {})}
    )


Answer = dict[str, Any] | httpx2.Response | Callable[[httpx2.Request], httpx2.Response]


class FakeAPI:
    """Answers each request with the next answer in line (the last one repeats)."""

    def __init__(self, *answers: Answer) -> None:
        self.answers = list(answers)
        self.requests: list[httpx2.Request] = []

    def __call__(self, request: httpx2.Request) -> httpx2.Response:
        self.requests.append(request)
        answer = self.answers[min(len(self.requests), len(self.answers)) - 1]
        if callable(answer):
            return answer(request)
        if isinstance(answer, httpx2.Response):
            return answer
        return httpx2.Response(200, json=answer, headers={"request-id": "req_01"})

    def bodies(self) -> list[dict[str, Any]]:
        return [json.loads(r.content) for r in self.requests]

    def provider(self, max_retries: int = 2) -> AnthropicProvider:
        return AnthropicProvider(
            api_key="test-key", max_retries=max_retries, transport=httpx2.MockTransport(self)
        )


class Bench:
    """A private registry: two immediate tools that write down their calls, one blocking."""

    def __init__(self) -> None:
        self.calls: list[tuple[str, dict[str, Any]]] = []
        self.registry = ToolRegistry()
        schema = {
            "type": "object",
            "properties": {"city": {"type": "string", "description": "A city name"}},
            "required": ["city"],
        }
        for name in ("get_weather", "get_time"):
            self.registry.register(
                Tool(
                    name=name,
                    description=f"The {name} tool.",
                    input_schema=schema,
                    func=self._recorder(name),
                )
            )
        self.registry.register(
            Tool(
                name="book_flight",
                description="Books a flight.",
                input_schema=schema,
                func=self._recorder("book_flight"),
                execution_mode=BLOCKING,
                timeout=30,
            )
        )

    def _recorder(self, name: str) -> Callable[[dict[str, Any], ToolContext], str]:
        def run(args: dict[str, Any], context: ToolContext) -> str:
            self.calls.append((name, args))
            return f"{name} for {args['city']}: fine"

        return run


def make_frame(tools: list[str], **options: Any) -> Frame:
    return Frame(
        agent_name="traveller",
        agent_type="main",
        messages=[{"role": "user", "content": [{"type": "text", "text": "Plan my trip."}]}],
        system_prompt="You plan trips carefully.",
        model=MODEL,
        tools=tools,
        max_tokens=1024,
        **options,
    )


def turn(api: FakeAPI, frame: Frame, bench: Bench | None = None, **options: Any) -> Any:
    bench = bench or Bench()
    return execute_turn(frame, llm=api.provider(), tools=bench.registry, **options)


class MessagesTestCase:
    def test_a_text_answer_is_sent_as_text(self) -> None:
        api = FakeAPI(message([text("Where would you like to go?")], "end_turn"))
        frame = make_frame(["get_weather"])

        result = turn(api, frame)

        assert result.action == TurnAction.SEND_TEXT
        assert result.text == "Where would you like to go?"
        assert frame.messages[-1] == {
            "role": "assistant",
            "content": [text("Where would you like to go?")],
        }
        [request] = api.requests
        assert (request.method, request.url.path) == ("POST", "/v1/messages")
        assert request.headers["anthropic-version"]
        # The SDK decides how the key travels (x-api-key or a bearer header); it must travel.
        sent = request.headers.get("x-api-key", "") + request.headers.get("authorization", "")
        assert "test-key" in sent
        body = api.bodies()[0]
        assert body["model"] == MODEL
        assert body["max_tokens"] == 1024
        assert body["system"] == "You plan trips carefully."
        assert body["messages"] == [{"role": "user", "content": [text("Plan my trip.")]}]

    def test_several_tool_uses_in_one_message_run_in_order_and_are_sent_back(self) -> None:
        api = FakeAPI(
            message(
                [
                    text("I'll check both cities."),
                    tool_use("toolu_01A09q90qw90lq917835lq9", "get_weather", city="Paris"),
                    tool_use("toolu_01B4nbQ9rVxqW2TqHRiGJx2p", "get_time", city="Tokyo"),
                    tool_use("toolu_01C7mHZ5nJt5kN2b1bGmW7zV", "get_weather", city="Oslo"),
                ],
                "tool_use",
            ),
            message([text("Paris and Oslo are fine; it is evening in Tokyo.")], "end_turn"),
        )
        bench = Bench()
        frame = make_frame(["get_weather", "get_time"])

        result = turn(api, frame, bench)

        assert result.action == TurnAction.SEND_TEXT
        assert result.text == "Paris and Oslo are fine; it is evening in Tokyo."
        assert bench.calls == [
            ("get_weather", {"city": "Paris"}),
            ("get_time", {"city": "Tokyo"}),
            ("get_weather", {"city": "Oslo"}),
        ]
        first, second = api.bodies()
        assert first["tools"] == [
            {
                "name": "get_weather",
                "description": "The get_weather tool.",
                "input_schema": {
                    "type": "object",
                    "properties": {"city": {"type": "string", "description": "A city name"}},
                    "required": ["city"],
                },
            },
            {
                "name": "get_time",
                "description": "The get_time tool.",
                "input_schema": first["tools"][0]["input_schema"],
            },
        ]
        assert second["tools"] == first["tools"]
        assert second["system"] == "You plan trips carefully."
        assert second["messages"] == [
            {"role": "user", "content": [text("Plan my trip.")]},
            {
                "role": "assistant",
                "content": [
                    text("I'll check both cities."),
                    tool_use("toolu_01A09q90qw90lq917835lq9", "get_weather", city="Paris"),
                    tool_use("toolu_01B4nbQ9rVxqW2TqHRiGJx2p", "get_time", city="Tokyo"),
                    tool_use("toolu_01C7mHZ5nJt5kN2b1bGmW7zV", "get_weather", city="Oslo"),
                ],
            },
            {
                "role": "user",
                "content": [
                    {
                        "type": "tool_result",
                        "tool_use_id": "toolu_01A09q90qw90lq917835lq9",
                        "content": "get_weather for Paris: fine",
                    },
                    {
                        "type": "tool_result",
                        "tool_use_id": "toolu_01B4nbQ9rVxqW2TqHRiGJx2p",
                        "content": "get_time for Tokyo: fine",
                    },
                    {
                        "type": "tool_result",
                        "tool_use_id": "toolu_01C7mHZ5nJt5kN2b1bGmW7zV",
                        "content": "get_weather for Oslo: fine",
                    },
                ],
            },
        ]

    def test_a_blocking_tool_use_suspends_and_its_rejection_reaches_the_model(self) -> None:
        api = FakeAPI(
            message(
                [text("Booking now."), tool_use("toolu_01E", "book_flight", city="Lima")],
                "tool_use",
            ),
            message([text("I did not book it.")], "end_turn"),
        )
        bench = Bench()
        frame = make_frame(["book_flight"])

        suspended = turn(api, frame, bench)
        assert suspended.action == TurnAction.SUSPENDED
        assert [(c.tool_use_id, c.input, c.preceding_text) for c in suspended.blocking] == [
            ("toolu_01E", {"city": "Lima"}, "Booking now.")
        ]
        assert len(api.requests) == 1

        decisions = {
            "toolu_01E": Decision("rejected", False, reason="too pricey", decided_by="alice")
        }
        result = turn(api, frame, bench, decisions=decisions)

        assert result.text == "I did not book it."
        assert bench.calls == []
        assert api.bodies()[1]["messages"][-1]["content"] == [
            {
                "type": "tool_result",
                "tool_use_id": "toolu_01E",
                "is_error": True,
                "content": "Rejected by alice: too pricey. book_flight did not run.",
            }
        ]


class StopReasonsTestCase:
    def test_end_turn_is_the_answer(self) -> None:
        api = FakeAPI(message([text("Done.")], "end_turn"))
        assert turn(api, make_frame([])).text == "Done."

    def test_tool_use_runs_the_tools_and_asks_again(self) -> None:
        api = FakeAPI(
            message([tool_use("toolu_01F", "get_time", city="Rome")], "tool_use"),
            message([text("Noon in Rome.")], "end_turn"),
        )
        bench = Bench()

        result = turn(api, make_frame(["get_time"]), bench)

        assert (result.action, result.text) == (TurnAction.SEND_TEXT, "Noon in Rome.")
        assert bench.calls == [("get_time", {"city": "Rome"})]
        assert len(api.requests) == 2

    def test_stop_sequence_is_the_answer_so_far(self) -> None:
        api = FakeAPI(message([text("Step one")], "stop_sequence", stop_sequence="###"))

        result = turn(api, make_frame([]))

        assert (result.action, result.text) == (TurnAction.SEND_TEXT, "Step one")

    def test_max_tokens_fails_the_turn_and_a_cut_off_tool_call_never_runs(self) -> None:
        api = FakeAPI(
            message(
                [text("Booking"), tool_use("toolu_01G", "get_weather", city="Par")], "max_tokens"
            )
        )
        bench = Bench()
        frame = make_frame(["get_weather"])

        result = turn(api, frame, bench)

        assert result.action == TurnAction.ERROR
        assert result.text == (
            "Agent 'traveller' stopped: the model's answer was cut off at its limit of 1024 "
            "output tokens (max_tokens in the agent file)."
        )
        assert bench.calls == []
        assert len(api.requests) == 1
        # What the model said is kept in the conversation for the audit trail.
        assert msgs.tool_uses(frame.messages[-1]["content"])[0]["id"] == "toolu_01G"

    def test_a_full_context_window_fails_the_turn(self) -> None:
        api = FakeAPI(message([text("The summary of the first")], "model_context_window_exceeded"))

        result = turn(api, make_frame([]))

        assert result.action == TurnAction.ERROR
        assert "filled the model's context window" in result.text

    def test_pause_turn_sends_the_paused_answer_back_and_continues_it(self) -> None:
        paused = [
            text("Let me search for that."),
            {
                "type": "server_tool_use",
                "id": "srvtoolu_01WYG3ziw53XMcoyKL4XcZmE",
                "name": "web_search",
                "input": {"query": "Lima weather"},
            },
        ]
        api = FakeAPI(
            message(paused, "pause_turn"),
            message([text("Lima is sunny.")], "end_turn"),
        )
        frame = make_frame([])

        result = turn(api, frame)

        assert result.action == TurnAction.SEND_TEXT
        assert result.text == "Let me search for that.\nLima is sunny."
        second = api.bodies()[1]["messages"]
        assert second[-1] == {"role": "assistant", "content": paused}
        # The continuation is the same turn: one assistant message holds both parts.
        assert frame.messages[1:] == [
            {"role": "assistant", "content": [*paused, text("Lima is sunny.")]}
        ]
        assert frame.iteration == 2

    def test_pause_turn_counts_against_the_iteration_limit(self) -> None:
        api = FakeAPI(message([text("Still searching.")], "pause_turn"))

        result = turn(api, make_frame([], max_iterations=3))

        assert result.action == TurnAction.MAX_ITERATIONS
        assert len(api.requests) == 3

    def test_a_refusal_fails_the_turn_with_the_explanation(self) -> None:
        api = FakeAPI(
            message(
                [],
                "refusal",
                stop_details={
                    "type": "refusal",
                    "category": "cyber",
                    "explanation": "This request could enable malware development.",
                },
            )
        )

        result = turn(api, make_frame([]))

        assert result.action == TurnAction.ERROR
        assert result.text == (
            "Agent 'traveller' stopped: the model declined to continue: "
            "This request could enable malware development."
        )

    def test_a_refusal_without_details_still_says_what_happened(self) -> None:
        api = FakeAPI(message([text("I can't")], "refusal"))

        result = turn(api, make_frame([]))

        assert (result.action, result.text) == (
            TurnAction.ERROR,
            "Agent 'traveller' stopped: the model declined to continue.",
        )


class ErrorsTestCase:
    def test_an_overloaded_answer_is_retried_by_the_sdk(self) -> None:
        api = FakeAPI(
            error(529, "overloaded_error", "Overloaded", FAST_RETRY),
            message([text("Here I am.")], "end_turn"),
        )

        result = turn(api, make_frame([]))

        assert (result.action, result.text) == (TurnAction.SEND_TEXT, "Here I am.")
        assert len(api.requests) == 2
        assert [r.headers["x-stainless-retry-count"] for r in api.requests] == ["0", "1"]
        assert api.bodies()[0] == api.bodies()[1]

    def test_a_500_every_time_is_an_error_naming_the_status_and_the_attempts(self) -> None:
        api = FakeAPI(error(500, "api_error", "Internal server error", FAST_RETRY))

        result = turn(api, make_frame([]))

        assert result.action == TurnAction.ERROR
        assert result.text == (
            "The Anthropic API answered 500 (api_error: Internal server error) after 3 attempts."
        )
        assert len(api.requests) == 3

    def test_the_number_of_attempts_follows_max_retries(self) -> None:
        api = FakeAPI(error(529, "overloaded_error", "Overloaded", FAST_RETRY))
        request = LLMRequest(
            agent_name="a", model=MODEL, system="", messages=[{"role": "user", "content": "hi"}]
        )

        with pytest.raises(LLMError) as raised:
            api.provider(max_retries=4).complete(request)

        assert str(raised.value) == (
            "The Anthropic API answered 529 (overloaded_error: Overloaded) after 5 attempts."
        )
        assert len(api.requests) == 5

    def test_a_request_the_api_rejects_is_not_retried(self) -> None:
        api = FakeAPI(error(400, "invalid_request_error", "max_tokens: must be at least 1"))

        result = turn(api, make_frame([]))

        assert result.text == (
            "The Anthropic API answered 400 (invalid_request_error: max_tokens: must be at "
            "least 1) after 1 attempt."
        )
        assert len(api.requests) == 1

    def test_an_unreachable_api_is_an_error(self) -> None:
        def refuse(request: httpx2.Request) -> httpx2.Response:
            raise httpx2.ConnectError("Connection refused", request=request)

        api = FakeAPI(refuse)

        result = turn(api, make_frame([]))

        assert result.action == TurnAction.ERROR
        assert result.text.startswith("The Anthropic API could not be reached after 3 attempts")
        assert len(api.requests) == 3

    def test_a_missing_api_key_is_an_error_of_the_turn_not_of_the_constructor(self) -> None:
        provider = AnthropicProvider("", transport=httpx2.MockTransport(FakeAPI()))

        result = execute_turn(make_frame([]), llm=provider, tools=ToolRegistry())

        assert result.action == TurnAction.ERROR
        assert result.text == (
            f"Agent 'traveller' uses the Claude model '{MODEL}', but ANTHROPIC_API_KEY is not set."
        )


@pytest.fixture
def claude_agent(db: Any) -> AgentDefinition:
    return AgentDefinition.objects.create(
        name="claude-clerk",
        model=MODEL,
        system_prompt="You look accounts up.",
        tools=["lookup_account", "transfer_funds"],
        max_iterations=5,
    )


@pytest.fixture
def operator(django_user_model: Any) -> Any:
    return django_user_model.objects.create_user("operator", password="operator-password-1")


def types(thread: Thread) -> list[str]:
    return list(Event.objects.filter(thread=thread).values_list("type", flat=True))


class EngineTestCase:
    def test_a_final_api_failure_fails_the_thread_and_keeps_what_was_saved(
        self, claude_agent: AgentDefinition, operator: Any
    ) -> None:
        api = FakeAPI(
            message(
                [text("Checking."), tool_use("toolu_01H", "lookup_account", account="ACC-7")],
                "tool_use",
            ),
            error(500, "api_error", "Internal server error", FAST_RETRY),
        )
        engine = Engine(provider=lambda frame: api.provider())
        thread = starting.start_thread(claude_agent, "Check ACC-7", operator)

        assert engine.advance(thread.id) is True

        thread.refresh_from_db()
        assert thread.status == Thread.Status.FAILED
        assert thread.error == (
            "The Anthropic API answered 500 (api_error: Internal server error) after 3 attempts."
        )
        assert len(api.requests) == 4
        assert types(thread) == [
            "THREAD_STARTED",
            "AGENT_MESSAGE",
            "TOOL_CALLED",
            "TOOL_RESULT",
            "THREAD_FAILED",
        ]
        failed = Event.objects.get(thread=thread, type="THREAD_FAILED")
        assert failed.payload["error"] == thread.error
        assert failed.payload["status"] == "failed"
        result = Event.objects.get(thread=thread, type="TOOL_RESULT")
        assert result.payload["tool_use_id"] == "toolu_01H"
        assert json.loads(result.payload["content"])["account"] == "ACC-7"
        frame = StackFrame.objects.get(thread=thread)
        assert frame.status == StackFrame.Status.FAILED
        assert [m["role"] for m in frame.messages] == ["user", "assistant", "user"]
        assert frame.messages[2]["content"][0]["tool_use_id"] == "toolu_01H"
        assert frame.messages[2]["content"][0]["content"] == result.payload["content"]
        # The request that failed carried the saved tool_result: nothing was lost before it.
        assert api.bodies()[-1]["messages"] == frame.messages

    def test_a_claude_agent_without_an_api_key_fails_with_a_clear_message(
        self, claude_agent: AgentDefinition, operator: Any, settings: Any
    ) -> None:
        settings.ANTHROPIC_API_KEY = ""
        thread = starting.start_thread(claude_agent, "Check ACC-7", operator)

        assert Engine().advance(thread.id) is True

        thread.refresh_from_db()
        assert thread.status == Thread.Status.FAILED
        assert thread.error == (
            f"Agent 'claude-clerk' uses the Claude model '{MODEL}', "
            "but ANTHROPIC_API_KEY is not set."
        )
        assert types(thread) == ["THREAD_STARTED", "THREAD_FAILED"]
        assert thread.lease_owner == ""

    def test_a_blocking_call_from_claude_suspends_and_resumes_through_the_sdk(
        self, claude_agent: AgentDefinition, operator: Any, users: dict[str, Any]
    ) -> None:
        api = FakeAPI(
            message(
                [
                    text("Paying the invoice."),
                    tool_use(
                        "toolu_01J",
                        "transfer_funds",
                        from_account="A-1",
                        to_account="B-2",
                        amount=120,
                    ),
                ],
                "tool_use",
            ),
            message([text("Paid.")], "end_turn"),
        )
        engine = Engine(provider=lambda frame: api.provider())
        thread = starting.start_thread(claude_agent, "Pay invoice 7", operator)

        engine.advance(thread.id)

        thread.refresh_from_db()
        assert thread.status == Thread.Status.SUSPENDED
        suspension = Suspension.objects.get(thread=thread)
        assert (suspension.tool_use_id, suspension.tool_input, suspension.prompt) == (
            "toolu_01J",
            {"from_account": "A-1", "to_account": "B-2", "amount": 120},
            "Paying the invoice.",
        )

        decisions.decide(
            suspension,
            users["reviewer"],  # a reviewer, not who started the run (four eyes)
            {
                "approved": True,
                "modifiedArgs": {"from_account": "A-1", "to_account": "B-2", "amount": 100},
            },
        )
        engine.advance(thread.id)

        thread.refresh_from_db()
        assert (thread.status, thread.result) == (Thread.Status.COMPLETED, "Paid.")
        [answer] = api.bodies()[1]["messages"][-1]["content"]
        assert answer["tool_use_id"] == "toolu_01J"
        assert "is_error" not in answer
        assert "Transferred 100 EUR from A-1 to B-2." in answer["content"]
        assert len(api.requests) == 2
