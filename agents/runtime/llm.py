"""LLM providers: `scripted` replays an agent file's turns; `anthropic` calls the Messages API."""

import uuid
from dataclasses import dataclass, field
from typing import Any, Protocol

import anthropic
import httpx2

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


@dataclass
class LLMResponse:
    content: list[dict[str, Any]]
    stop_reason: str = "end_turn"
    stop_detail: str = ""  # why the model refused, when it says


class LLMProvider(Protocol):
    def complete(self, request: LLMRequest) -> LLMResponse: ...


def new_tool_use_id() -> str:
    return "toolu_" + uuid.uuid4().hex[:24]


@dataclass
class ScriptedProvider:
    """Replays the assistant turns of an agent file, in order.

    The turn to play is the number of assistant messages already in the frame, so replay is
    durable: a frame resumed in another process plays the same next turn.
    A turn is {text?, tool_calls?: [{name, input}], error?, if_error?}: `error` fails the
    call; `if_error` is the turn played instead when the last tool_result was an error (a
    rejection, say), so a scripted agent can stop instead of going on.
    """

    script: list[dict[str, Any]]

    def complete(self, request: LLMRequest) -> LLMResponse:
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
        stop = "tool_use" if any(b["type"] == "tool_use" for b in content) else "end_turn"
        return LLMResponse(content=content, stop_reason=stop)


def _last_result_failed(messages: list[dict[str, Any]]) -> bool:
    if not messages or messages[-1].get("role") != "user":
        return False
    content = messages[-1].get("content")
    if not isinstance(content, list):
        return False
    return any(b.get("type") == "tool_result" and b.get("is_error") for b in content)


def _plain_block(block: Any) -> dict[str, Any]:
    """A response block as a dict the API accepts back in the next request."""
    if block.type == "text":
        return {"type": "text", "text": block.text}
    if block.type == "tool_use":
        return {"type": "tool_use", "id": block.id, "name": block.name, "input": block.input}
    return block.model_dump(exclude_none=True)


class AnthropicProvider:
    """Claude through the official SDK. `transport` lets tests answer the HTTP calls.

    A missing API key is reported by `complete`, not the constructor: the engine builds the
    provider outside the turn, and only an LLMError raised inside the turn fails the thread
    cleanly with its message.
    """

    def __init__(
        self,
        api_key: str,
        *,
        max_retries: int = 2,
        timeout: float = 120,
        transport: httpx2.BaseTransport | None = None,
    ) -> None:
        self.attempts = 0  # HTTP requests the last `complete` sent, the SDK's retries included
        self.client: anthropic.Anthropic | None = None
        if not api_key:
            return
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

    def complete(self, request: LLMRequest) -> LLMResponse:
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
        self.attempts = 0
        try:
            response = self.client.messages.create(**params)
        except anthropic.APIStatusError as e:
            raise LLMError(
                f"The Anthropic API answered {e.status_code} ({_error_type(e)}: "
                f"{_error_message(e)}) {self._after()}."
            ) from e
        except anthropic.APITimeoutError as e:
            raise LLMError(f"The Anthropic API did not answer in time {self._after()}.") from e
        except anthropic.APIConnectionError as e:
            raise LLMError(f"The Anthropic API could not be reached {self._after()}: {e}") from e
        except anthropic.AnthropicError as e:
            raise LLMError(f"The Anthropic API call failed {self._after()}: {e}") from e
        content = [_plain_block(b) for b in response.content]
        details = response.stop_details
        return LLMResponse(
            content=content,
            stop_reason=response.stop_reason or "end_turn",
            stop_detail=(details.explanation or details.category or "") if details else "",
        )

    def _after(self) -> str:
        return f"after {self.attempts} attempt{'s' if self.attempts != 1 else ''}"


def _error_type(e: anthropic.APIStatusError) -> str:
    body = e.body if isinstance(e.body, dict) else {}
    error = body.get("error") if isinstance(body.get("error"), dict) else {}
    return str(error.get("type") or "error")


def _error_message(e: anthropic.APIStatusError) -> str:
    body = e.body if isinstance(e.body, dict) else {}
    error = body.get("error") if isinstance(body.get("error"), dict) else {}
    return str(error.get("message") or e.message)
