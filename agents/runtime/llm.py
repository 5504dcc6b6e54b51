"""LLM providers: `scripted` replays an agent file's turns; `anthropic` calls the Messages API."""

from __future__ import annotations

import json
import os
import re
import time
import uuid
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol

import httpx2

if TYPE_CHECKING:
    import anthropic

SCRIPTED = "scripted"


class LLMError(Exception):
    """The model could not be reached or refused the request; the message says why."""


@dataclass
class LLMRequest:
    agent_name: str
    model: str
    system: str
    messages: list[dict[str, Any]]
    tools: list[dict[str, Any]] = field(default_factory=list)
    max_tokens: int = 4096
    stream: bool = False  # only the scripted provider reads it: the anthropic one always streams


@dataclass
class Usage:
    input_tokens: int = 0
    output_tokens: int = 0


@dataclass
class LLMResponse:
    content: list[dict[str, Any]]
    stop_reason: str = "end_turn"
    stop_detail: str = ""  # why the model refused, when it says
    usage: Usage = field(default_factory=Usage)


class StreamListener(Protocol):
    """Hears a call's answer while it is written; the returned LLMResponse is still the whole."""

    def text(self, delta: str) -> None:
        """A piece of the answer's text, in order."""

    def tool(self, name: str) -> None:
        """The model started a tool_use block calling `name`."""

    def restart(self) -> None:
        """Everything heard so far for this call is void: the call is being made again."""


class LLMProvider(Protocol):
    def complete(
        self, request: LLMRequest, listener: StreamListener | None = None
    ) -> LLMResponse: ...


def new_tool_use_id() -> str:
    return "toolu_" + uuid.uuid4().hex[:24]


def _scripted_chunk_delay() -> float:
    raw = os.environ.get("SCRIPTED_CHUNK_DELAY", "")
    if not raw:
        return 0.05
    try:
        return float(raw)
    except ValueError:
        raise ValueError(
            f"SCRIPTED_CHUNK_DELAY must be a number of seconds, not {raw!r}."
        ) from None


@dataclass
class ScriptedProvider:
    """Replays the assistant turns of an agent file, in order.

    The turn to play is the number of assistant messages already in the frame, so replay is
    durable: a frame resumed in another process plays the same next turn.
    A turn is {text?, tool_calls?: [{name, input}], error?, if_error?}: `error` fails the
    call; `if_error` is the turn played instead when the last tool_result was an error (a
    rejection, say), so a scripted agent can stop instead of going on.
    With `request.stream` and a listener, the text is told a few words at a time,
    `chunk_delay` seconds apart, so a demo shows an answer being written.
    """

    script: list[dict[str, Any]]
    chunk_delay: float = field(default_factory=_scripted_chunk_delay)

    def complete(self, request: LLMRequest, listener: StreamListener | None = None) -> LLMResponse:
        turn = sum(1 for m in request.messages if m.get("role") == "assistant")
        if turn >= len(self.script):
            raise LLMError(
                f"The script of agent '{request.agent_name}' has no turn {turn + 1} "
                f"(it has {len(self.script)})."
            )
        step = self.script[turn]
        if step.get("if_error") and _last_result_failed(request.messages):
            step = step["if_error"]
        if step.get("error"):
            raise LLMError(str(step["error"]))
        content: list[dict[str, Any]] = []
        if step.get("text"):
            content.append({"type": "text", "text": str(step["text"])})
        for call in step.get("tool_calls") or []:
            content.append(
                {
                    "type": "tool_use",
                    "id": new_tool_use_id(),
                    "name": call["name"],
                    "input": dict(call.get("input") or {}),
                }
            )
        if request.stream and listener is not None:
            self._tell(content, listener)
        stop = "tool_use" if any(b["type"] == "tool_use" for b in content) else "end_turn"
        return LLMResponse(
            content=content, stop_reason=stop, usage=_scripted_usage(request, content)
        )

    def _tell(self, content: list[dict[str, Any]], listener: StreamListener) -> None:
        for block in content:
            if block["type"] == "text":
                for n, chunk in enumerate(_chunks(block["text"])):
                    if n and self.chunk_delay > 0:
                        time.sleep(self.chunk_delay)
                    listener.text(chunk)
            else:
                listener.tool(block["name"])


CHUNK_WORDS = 4


def _chunks(text: str) -> list[str]:
    """`text` in pieces of CHUNK_WORDS words, spaces kept, so the pieces join to `text`."""
    words = re.split(r"(?<=\s)(?=\S)", text)
    return ["".join(words[i : i + CHUNK_WORDS]) for i in range(0, len(words), CHUNK_WORDS)]


def _scripted_usage(request: LLMRequest, content: list[dict[str, Any]]) -> Usage:
    # No model counts tokens here: about four characters a token, of the prompt as sent and
    # of the answer, so scripted threads show plausible, repeatable usage sums in the demo.
    prompt = len(request.system) + len(json.dumps(request.messages))
    answer = sum(
        len(b["text"]) if b["type"] == "text" else len(b["name"]) + len(json.dumps(b["input"]))
        for b in content
    )
    return Usage(input_tokens=max(1, prompt // 4), output_tokens=max(1, answer // 4))


def _last_result_failed(messages: list[dict[str, Any]]) -> bool:
    if not messages or messages[-1].get("role") != "user":
        return False
    content = messages[-1].get("content")
    if not isinstance(content, list):
        return False
    return any(b.get("type") == "tool_result" and b.get("is_error") for b in content)


def _plain_block(block: anthropic.types.ContentBlock) -> dict[str, Any]:
    """A response block as a dict the API accepts back in the next request."""
    if block.type == "text":
        return {"type": "text", "text": block.text}
    if block.type == "tool_use":
        return {"type": "tool_use", "id": block.id, "name": block.name, "input": block.input}
    return block.model_dump(exclude_none=True)


# Error types the API sends in a stream it then breaks off; the same call made again may pass.
TRANSIENT_STREAM_ERRORS = {"overloaded_error", "api_error", "rate_limit_error"}


class _StreamBroken(Exception):
    """An answer stopped after it began; `retry` says whether making the call again may help."""

    def __init__(self, cause: Exception | None, *, retry: bool) -> None:
        super().__init__(str(cause) if cause else "the stream ended before message_stop")
        self.cause = cause
        self.retry = retry


class AnthropicProvider:
    """Claude through the official SDK, streamed. `transport` lets tests answer the HTTP calls.

    A missing API key is reported by `complete`, not the constructor: the engine builds the
    provider outside the turn, and only an LLMError raised inside the turn fails the thread
    cleanly with its message.

    The SDK retries a request that fails before its answer begins, but not a stream that
    breaks off midway (an `error` event such as overloaded_error): `complete` makes such a
    call again, up to `max_retries` times, `restart_delay` × n seconds apart, after telling
    the listener to forget what it heard; the response holds only the last call's answer.
    """

    def __init__(
        self,
        api_key: str,
        *,
        max_retries: int = 2,
        timeout: float = 120,
        transport: httpx2.BaseTransport | None = None,
    ) -> None:
        self.attempts = 0  # HTTP requests the last `complete` sent, all retries included
        self.max_retries = max_retries
        self.restart_delay = 0.5
        self.client: anthropic.Anthropic | None = None
        if not api_key:
            return
        # The SDK is imported where a provider with a key is made, not with this module: it
        # is some 3,600 modules and 80 MB, which every process that loads the engine (the
        # web server, the deadlines worker) would hold while no agent calls Claude.
        import anthropic

        options: dict[str, Any] = {"event_hooks": {"request": [self._count_attempt]}}
        if transport is not None:
            options["transport"] = transport
        self.client = anthropic.Anthropic(
            api_key=api_key,
            max_retries=max_retries,
            timeout=timeout,
            http_client=anthropic.DefaultHttpxClient(**options),
        )

    def _count_attempt(self, request: httpx2.Request) -> None:
        self.attempts += 1

    def complete(self, request: LLMRequest, listener: StreamListener | None = None) -> LLMResponse:
        if self.client is None:
            raise LLMError(
                f"Agent '{request.agent_name}' uses the Claude model '{request.model}', but "
                "ANTHROPIC_API_KEY is not set."
            )
        params: dict[str, Any] = {
            "model": request.model,
            "max_tokens": request.max_tokens,
            "messages": request.messages,
        }
        if request.system:
            params["system"] = request.system
        if request.tools:
            params["tools"] = request.tools
        import anthropic  # loaded by __init__ with the client: see there

        self.attempts = 0
        restarts = 0
        while True:
            try:
                message = self._stream(self.client, params, listener)
                break
            except _StreamBroken as broken:
                if not broken.retry or restarts >= self.max_retries:
                    raise self._broken_error(broken) from broken.cause
            except anthropic.APIStatusError as e:
                raise LLMError(
                    f"The Anthropic API answered {e.status_code} ({_error_type(e)}: "
                    f"{_error_message(e)}) {self._after()}."
                ) from e
            except anthropic.APITimeoutError as e:
                raise LLMError(f"The Anthropic API did not answer in time {self._after()}.") from e
            except anthropic.APIConnectionError as e:
                raise LLMError(
                    f"The Anthropic API could not be reached {self._after()}: {e}"
                ) from e
            except anthropic.AnthropicError as e:
                raise LLMError(f"The Anthropic API call failed {self._after()}: {e}") from e
            restarts += 1
            if listener is not None:
                listener.restart()
            time.sleep(self.restart_delay * restarts)
        details = message.stop_details
        return LLMResponse(
            content=[_plain_block(b) for b in message.content],
            stop_reason=message.stop_reason or "end_turn",
            stop_detail=(details.explanation or details.category or "") if details else "",
            usage=Usage(
                input_tokens=message.usage.input_tokens or 0,
                output_tokens=message.usage.output_tokens or 0,
            ),
        )

    def _stream(
        self,
        client: anthropic.Anthropic,
        params: dict[str, Any],
        listener: StreamListener | None,
    ) -> anthropic.types.Message:
        """One call: its whole message, told to `listener` as it arrives.

        Errors before the answer begins are the SDK's own; a break after it is _StreamBroken.
        """
        import anthropic  # loaded by __init__ with the client: see there

        with client.messages.stream(**params) as stream:
            if stream.response.headers.get("content-type", "").startswith("application/json"):
                # A server that ignores `"stream": true` answers one JSON message (some
                # gateways do, and so do the canned answers of tests/agents/
                # test_anthropic_provider.py); it is told to the listener whole.
                message = anthropic.types.Message.construct(**json.loads(stream.response.read()))
                if listener is not None:
                    _tell_whole(message, listener)
                return message
            complete = False
            try:
                for event in stream:
                    if listener is not None:
                        _tell_event(event, listener)
                    complete = complete or event.type == "message_stop"
            except anthropic.APIStatusError as e:
                raise _StreamBroken(e, retry=_error_type(e) in TRANSIENT_STREAM_ERRORS) from e
            except httpx2.TransportError as e:
                raise _StreamBroken(e, retry=True) from e
            except ValueError as e:
                # The SDK parses a tool call's streamed input as it grows; input that is not
                # JSON is the answer's fault, not the gateway's: the call fails as the model's.
                raise LLMError(
                    f"The Anthropic API streamed a tool call whose input is not JSON ({e}) "
                    f"{self._after()}."
                ) from e
            if not complete:
                raise _StreamBroken(None, retry=True)
            return stream.get_final_message()

    def _broken_error(self, broken: _StreamBroken) -> LLMError:
        import anthropic  # loaded by __init__ with the client: see there

        cause = broken.cause
        if isinstance(cause, anthropic.APIStatusError):
            return LLMError(
                f"The Anthropic API broke off its streamed answer ({_error_type(cause)}: "
                f"{_error_message(cause)}) {self._after()}."
            )
        if cause is not None:
            return LLMError(
                f"The connection to the Anthropic API broke during its answer {self._after()}: "
                f"{cause}"
            )
        return LLMError(f"The Anthropic API's streamed answer ended unfinished {self._after()}.")

    def _after(self) -> str:
        return f"after {self.attempts} attempt{'s' if self.attempts != 1 else ''}"


def _tell_event(event: anthropic.ParsedMessageStreamEvent, listener: StreamListener) -> None:
    if event.type == "content_block_delta" and event.delta.type == "text_delta":
        listener.text(event.delta.text)
    elif event.type == "content_block_start" and event.content_block.type == "tool_use":
        listener.tool(event.content_block.name)


def _tell_whole(message: anthropic.types.Message, listener: StreamListener) -> None:
    for block in message.content:
        if block.type == "text":
            listener.text(block.text)
        elif block.type == "tool_use":
            listener.tool(block.name)


def _error_type(e: anthropic.APIStatusError) -> str:
    body = e.body if isinstance(e.body, dict) else {}
    error = found if isinstance(found := body.get("error"), dict) else {}
    return str(error.get("type") or "error")


def _error_message(e: anthropic.APIStatusError) -> str:
    body = e.body if isinstance(e.body, dict) else {}
    error = found if isinstance(found := body.get("error"), dict) else {}
    return str(error.get("message") or e.message)
