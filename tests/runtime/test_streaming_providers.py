"""Streaming in the LLM providers: what a listener hears while an answer is written, and usage.

The anthropic provider runs through the real SDK; an injected HTTP transport answers with
Messages API event streams as the API sends them (text/event-stream: message_start with usage,
content blocks with their deltas, ping, message_delta, message_stop, and `error` events).
"""

import json
from collections.abc import Iterator
from typing import Any

import httpx2
import pytest

from agents.runtime.llm import (
    AnthropicProvider,
    LLMError,
    LLMRequest,
    LLMResponse,
    ScriptedProvider,
    Usage,
)

MODEL = "claude-opus-4-6"
FAST_RETRY = {"retry-after-ms": "1"}  # the SDK waits what the API asks, so its retries are quick
QUESTION = "What's the weather like in San Francisco?"


class Recorder:
    """A StreamListener that writes down what it hears, in order."""

    def __init__(self) -> None:
        self.heard: list[tuple[str, ...]] = []

    def text(self, delta: str) -> None:
        self.heard.append(("text", delta))

    def tool(self, name: str) -> None:
        self.heard.append(("tool", name))

    def restart(self) -> None:
        self.heard.append(("restart",))

    def texts(self) -> list[str]:
        return [h[1] for h in self.heard if h[0] == "text"]

    def text_since_restart(self) -> str:
        restarts = [i for i, h in enumerate(self.heard) if h == ("restart",)]
        since = self.heard[restarts[-1] + 1 :] if restarts else self.heard
        return "".join(h[1] for h in since if h[0] == "text")


def event(data: dict[str, Any]) -> bytes:
    """One server-sent event: its name is the `type` of its data, as the API sends it."""
    return f"event: {data['type']}\ndata: {json.dumps(data)}\n\n".encode()


def message_start(input_tokens: int) -> dict[str, Any]:
    return {
        "type": "message_start",
        "message": {
            "id": "msg_014p7gG3wDgGV9EUtLvnow3U",
            "type": "message",
            "role": "assistant",
            "model": MODEL,
            "content": [],
            "stop_reason": None,
            "stop_sequence": None,
            "usage": {"input_tokens": input_tokens, "output_tokens": 1},
        },
    }


PING = {"type": "ping"}


def text_block(index: int, *pieces: str) -> list[dict[str, Any]]:
    return [
        {
            "type": "content_block_start",
            "index": index,
            "content_block": {"type": "text", "text": ""},
        },
        *(
            {
                "type": "content_block_delta",
                "index": index,
                "delta": {"type": "text_delta", "text": p},
            }
            for p in pieces
        ),
        {"type": "content_block_stop", "index": index},
    ]


def tool_block(index: int, use_id: str, name: str, *json_pieces: str) -> list[dict[str, Any]]:
    return [
        {
            "type": "content_block_start",
            "index": index,
            "content_block": {"type": "tool_use", "id": use_id, "name": name, "input": {}},
        },
        *(
            {
                "type": "content_block_delta",
                "index": index,
                "delta": {"type": "input_json_delta", "partial_json": p},
            }
            for p in json_pieces
        ),
        {"type": "content_block_stop", "index": index},
    ]


def message_end(stop_reason: str, output_tokens: int) -> list[dict[str, Any]]:
    return [
        {
            "type": "message_delta",
            "delta": {"type": "message_delta", "stop_reason": stop_reason, "stop_sequence": None},
            "usage": {"output_tokens": output_tokens},
        },
        {"type": "message_stop"},
    ]


def overloaded() -> dict[str, Any]:
    return {"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"}}


WEATHER_PIECES = ("Okay", ", let's check", " the weather for San Francisco", ", CA:")
# Pieces cut inside keys and values: only their join is JSON.
LOCATION_JSON = ("", '{"location": "San Fra', 'ncisco, CA", "un', 'it": "fahrenheit"}')
# The text block's start, a ping, then its deltas: the order of the API's own example.
WEATHER_CALL = [
    message_start(472),
    {"type": "content_block_start", "index": 0, "content_block": {"type": "text", "text": ""}},
    PING,
    *text_block(0, *WEATHER_PIECES)[1:],
    *tool_block(1, "toolu_01T1x1fJ34qAmk2tNTrN7Up6", "get_weather", *LOCATION_JSON),
    *message_end("tool_use", 89),
]


def stream(*events: dict[str, Any]) -> httpx2.Response:
    """A 200 whose body arrives event by event, as the API writes it."""

    def body() -> Iterator[bytes]:
        for data in events:
            yield event(data)

    return httpx2.Response(
        200,
        headers={"content-type": "text/event-stream", "request-id": "req_01"},
        content=body(),
    )


def status_error(status: int, kind: str, said: str) -> httpx2.Response:
    body = {"type": "error", "error": {"type": kind, "message": said}}
    return httpx2.Response(status, json=body, headers={"request-id": "req_02", **FAST_RETRY})


class FakeAPI:
    """Answers each request with the next stream in line (the last one repeats)."""

    def __init__(self, *answers: list[dict[str, Any]] | httpx2.Response) -> None:
        self.answers = list(answers)
        self.requests: list[httpx2.Request] = []

    def __call__(self, request: httpx2.Request) -> httpx2.Response:
        self.requests.append(request)
        answer = self.answers[min(len(self.requests), len(self.answers)) - 1]
        return answer if isinstance(answer, httpx2.Response) else stream(*answer)

    def provider(self, max_retries: int = 2) -> AnthropicProvider:
        provider = AnthropicProvider(
            api_key="test-key", max_retries=max_retries, transport=httpx2.MockTransport(self)
        )
        provider.restart_delay = 0
        return provider


def ask(stream: bool = False) -> LLMRequest:
    return LLMRequest(
        agent_name="forecaster",
        model=MODEL,
        system="You answer about the weather.",
        messages=[{"role": "user", "content": QUESTION}],
        stream=stream,
    )


def complete(api: FakeAPI, listener: Recorder | None = None, **options: Any) -> LLMResponse:
    return api.provider(**options).complete(ask(), listener)


class AnthropicStreamTestCase:
    def test_the_listener_hears_the_text_deltas_in_order_and_they_make_the_final_text(
        self,
    ) -> None:
        listener = Recorder()

        response = complete(FakeAPI(WEATHER_CALL), listener)

        assert listener.texts() == list(WEATHER_PIECES)
        assert response.content[0] == {"type": "text", "text": "".join(WEATHER_PIECES)}

    def test_a_tool_use_is_announced_when_it_starts_and_its_input_is_the_parsed_json(
        self,
    ) -> None:
        listener = Recorder()

        response = complete(FakeAPI(WEATHER_CALL), listener)

        assert listener.heard[-1] == ("tool", "get_weather")
        assert listener.heard.count(("tool", "get_weather")) == 1
        assert response.content[1] == {
            "type": "tool_use",
            "id": "toolu_01T1x1fJ34qAmk2tNTrN7Up6",
            "name": "get_weather",
            "input": {"location": "San Francisco, CA", "unit": "fahrenheit"},
        }
        assert response.stop_reason == "tool_use"

    def test_usage_is_the_token_counts_of_the_stream(self) -> None:
        response = complete(FakeAPI(WEATHER_CALL))

        assert response.usage == Usage(input_tokens=472, output_tokens=89)

    def test_the_request_asks_for_a_stream(self) -> None:
        api = FakeAPI(WEATHER_CALL)

        complete(api)

        [request] = api.requests
        body = json.loads(request.content)
        assert body["stream"] is True
        assert body["messages"] == [{"role": "user", "content": QUESTION}]
        assert body["system"] == "You answer about the weather."

    def test_without_a_listener_the_response_is_the_same(self) -> None:
        heard = complete(FakeAPI(WEATHER_CALL), Recorder())
        unheard = complete(FakeAPI(WEATHER_CALL))

        assert unheard == heard

    def test_an_overloaded_answer_before_the_stream_is_retried_by_the_sdk_alone(self) -> None:
        api = FakeAPI(status_error(529, "overloaded_error", "Overloaded"), WEATHER_CALL)
        listener = Recorder()

        response = complete(api, listener)

        assert len(api.requests) == 2
        assert ("restart",) not in listener.heard
        assert response.content[0]["text"] == "".join(WEATHER_PIECES)


class AnthropicStreamErrorsTestCase:
    def test_an_overloaded_error_mid_stream_makes_the_call_again_and_keeps_only_that_answer(
        self,
    ) -> None:
        broken = [message_start(472), *text_block(0, "Half", " an answer")[:-1], overloaded()]
        second = [
            message_start(472),
            *text_block(0, "Sunny", " and mild."),
            *message_end("end_turn", 7),
        ]
        api = FakeAPI(broken, second)
        listener = Recorder()
        provider = api.provider()

        response = provider.complete(ask(), listener)

        assert len(api.requests) == 2
        assert provider.attempts == 2
        assert listener.heard == [
            ("text", "Half"),
            ("text", " an answer"),
            ("restart",),
            ("text", "Sunny"),
            ("text", " and mild."),
        ]
        assert listener.text_since_restart() == "Sunny and mild."
        assert response.content == [{"type": "text", "text": "Sunny and mild."}]
        assert response.usage == Usage(input_tokens=472, output_tokens=7)
        assert json.loads(api.requests[0].content) == json.loads(api.requests[1].content)

    def test_errors_mid_stream_past_max_retries_fail_naming_the_error_and_the_attempts(
        self,
    ) -> None:
        api = FakeAPI([message_start(472), *text_block(0, "Half")[:-1], overloaded()])
        listener = Recorder()

        with pytest.raises(LLMError) as raised:
            complete(api, listener, max_retries=2)

        assert str(raised.value) == (
            "The Anthropic API broke off its streamed answer (overloaded_error: Overloaded) "
            "after 3 attempts."
        )
        assert len(api.requests) == 3
        assert listener.heard.count(("restart",)) == 2

    def test_a_request_error_mid_stream_is_not_made_again(self) -> None:
        invalid = {
            "type": "error",
            "error": {"type": "invalid_request_error", "message": "Bad tool schema"},
        }
        api = FakeAPI([message_start(472), invalid])
        listener = Recorder()

        with pytest.raises(LLMError) as raised:
            complete(api, listener)

        assert str(raised.value) == (
            "The Anthropic API broke off its streamed answer (invalid_request_error: "
            "Bad tool schema) after 1 attempt."
        )
        assert len(api.requests) == 1
        assert listener.heard == []

    def test_a_tool_input_that_is_not_json_fails_the_call_as_an_llm_error(self) -> None:
        # The model's streamed tool input must be JSON; the SDK's parser raised a bare
        # ValueError, which the engine took for a bug in the gateway instead of the answer's.
        broken = [
            message_start(472),
            *tool_block(0, "toolu_01Bad", "get_weather", '{"location": ', "Paris}"),
            *message_end("tool_use", 20),
        ]
        api = FakeAPI(broken)

        with pytest.raises(LLMError) as raised:
            complete(api, Recorder())

        assert str(raised.value).startswith(
            "The Anthropic API streamed a tool call whose input is not JSON"
        )
        assert len(api.requests) == 1

    def test_a_stream_that_ends_before_message_stop_is_made_again(self) -> None:
        cut = [message_start(472), *text_block(0, "Sunny")]
        whole = [
            message_start(472),
            *text_block(0, "Sunny", " all day."),
            *message_end("end_turn", 5),
        ]
        api = FakeAPI(cut, whole)
        listener = Recorder()

        response = complete(api, listener)

        assert len(api.requests) == 2
        assert listener.text_since_restart() == "Sunny all day."
        assert response.content == [{"type": "text", "text": "Sunny all day."}]


SCRIPT = [
    {
        "text": "Let me look that up for you in the weather service right away.",
        "tool_calls": [
            {"name": "get_weather", "input": {"city": "Paris"}},
            {"name": "get_time", "input": {"city": "Paris"}},
        ],
    }
]


class ScriptedStreamTestCase:
    def test_with_stream_the_text_comes_in_chunks_that_join_to_the_text(self) -> None:
        listener = Recorder()

        response = ScriptedProvider(SCRIPT, chunk_delay=0.001).complete(ask(stream=True), listener)

        chunks = listener.texts()
        assert len(chunks) > 1
        assert "".join(chunks) == SCRIPT[0]["text"] == response.content[0]["text"]
        assert all(1 <= len(c.split()) <= 6 for c in chunks)

    def test_with_stream_each_tool_call_is_announced_after_the_text(self) -> None:
        listener = Recorder()

        response = ScriptedProvider(SCRIPT, chunk_delay=0).complete(ask(stream=True), listener)

        assert listener.heard[-2:] == [("tool", "get_weather"), ("tool", "get_time")]
        assert [b["name"] for b in response.content[1:]] == ["get_weather", "get_time"]

    def test_without_stream_the_listener_hears_nothing_and_the_response_is_the_same(
        self,
    ) -> None:
        listener = Recorder()
        provider = ScriptedProvider(SCRIPT, chunk_delay=0)

        quiet = provider.complete(ask(stream=False), listener)
        streamed = provider.complete(ask(stream=True), Recorder())

        assert listener.heard == []
        assert quiet.content[0] == streamed.content[0]
        assert [b["input"] for b in quiet.content[1:]] == [b["input"] for b in streamed.content[1:]]
        assert (quiet.stop_reason, quiet.usage) == (streamed.stop_reason, streamed.usage)

    def test_usage_is_counted_from_the_prompt_and_the_answer(self) -> None:
        response = ScriptedProvider(SCRIPT, chunk_delay=0).complete(ask())

        assert response.usage.input_tokens > 0
        assert response.usage.output_tokens >= len(SCRIPT[0]["text"]) // 4
        assert ScriptedProvider(SCRIPT).complete(ask()).usage == response.usage

    def test_the_chunk_delay_can_come_from_the_environment(
        self, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        monkeypatch.setenv("SCRIPTED_CHUNK_DELAY", "0.002")

        assert ScriptedProvider(SCRIPT).chunk_delay == 0.002
