"""The LLM a frame's turn calls, and whether its answers stream."""

import functools
import inspect
from typing import Any

from django.conf import settings

from agents.models import AgentDefinition
from agents.runtime.llm import (
    SCRIPTED,
    AnthropicProvider,
    LLMProvider,
    LLMRequest,
    LLMResponse,
    ScriptedProvider,
    StreamListener,
)
from agents.runtime.turn import Frame


def default_provider(frame: Frame) -> LLMProvider:
    if frame.model == SCRIPTED:
        script = (
            AgentDefinition.objects.filter(name=frame.agent_name)
            .values_list("script", flat=True)
            .first()
        )
        return ScriptedProvider(script or [])
    return _anthropic(
        settings.ANTHROPIC_API_KEY, settings.ANTHROPIC_MAX_RETRIES, settings.ANTHROPIC_TIMEOUT
    )


@functools.lru_cache(maxsize=4)
def _anthropic(api_key: str, max_retries: int, timeout: int) -> AnthropicProvider:
    """One client (and its connection pool) per process and configuration, not one per turn."""
    return AnthropicProvider(api_key, max_retries=max_retries, timeout=timeout)


class Streaming:
    """A provider whose answers may stream: the request says whether (the scripted model
    streams only when its agent file asks; Claude always does), and the listener hears the
    text as it comes. A provider whose `complete` takes no listener (a test's) is called
    without one."""

    def __init__(self, provider: LLMProvider, stream: bool) -> None:
        self.provider = provider
        self.stream = stream
        self.listens = _takes_listener(provider)

    def complete(self, request: LLMRequest, listener: StreamListener | None = None) -> LLMResponse:
        request.stream = self.stream
        if listener is None or not self.listens:
            return self.provider.complete(request)
        return self.provider.complete(request, listener)


def _takes_listener(provider: Any) -> bool:
    try:
        return len(inspect.signature(provider.complete).parameters) >= 2
    except (TypeError, ValueError):
        return False
