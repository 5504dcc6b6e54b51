"""A turn's terms: the frame it runs, the decisions it is given, what it returns, its hooks."""

import contextlib
from collections.abc import Iterator
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any

from agents.runtime.llm import LLMResponse, StreamListener
from agents.runtime.tools import Tool


@dataclass
class Frame:
    """One paused or running agent: everything needed to resume it anywhere."""

    agent_name: str
    agent_type: str  # main | skill | agent
    messages: list[dict[str, Any]]
    system_prompt: str = ""
    model: str = "scripted"
    tools: list[str] = field(default_factory=list)
    tool_overrides: dict[str, dict[str, Any]] = field(default_factory=dict)
    iteration: int = 0
    max_iterations: int = 10
    parent_tool_use_id: str | None = None
    max_tokens: int = 4096
    key: Any = None  # the stored frame's primary key, when there is one


@dataclass
class Decision:
    """A person's (or the clock's) answer to a blocking call."""

    status: str  # approved | rejected | timed_out | cancelled | responded
    approved: bool
    reason: str = ""
    modified_args: dict[str, Any] | None = None
    response: str | None = None
    decided_by: str | None = None  # a username; None when the deadline decided


class TurnAction(StrEnum):
    SEND_TEXT = "send_text"
    COMPLETE = "complete"
    CHILD_ACTIVATED = "child_activated"
    SUSPENDED = "suspended"
    # Agents as tools: calls of agent__<name> that have no instance yet (the engine starts
    # them, then runs the turn again), and a turn whose only calls left are running instances.
    FAN_OUT = "fan_out"
    WAITING = "waiting"
    MAX_ITERATIONS = "max_iterations"
    ERROR = "error"


@dataclass
class BlockingCall:
    tool_use_id: str
    tool: Tool
    input: dict[str, Any]
    preceding_text: str = ""


@dataclass
class TurnResult:
    action: TurnAction
    text: str = ""
    child_frame: Frame | None = None
    blocking: list[BlockingCall] = field(default_factory=list)


class Hooks:
    """Where the engine persists and observes a turn; the default does nothing."""

    def llm_responded(self, frame: Frame, response: LLMResponse) -> None:
        pass

    def listener(self, frame: Frame) -> StreamListener | None:
        """Who hears the model's answer as it streams (None: nobody)."""
        return None

    @contextlib.contextmanager
    def tool_scope(
        self, frame: Frame, tool_use: dict[str, Any], runs: bool = True
    ) -> Iterator[None]:
        """Wraps one tool's run and the recording of its result. The engine makes the call
        durable before the tool runs and saves the result after it, each in a short
        transaction of its own: the tool itself runs outside any transaction. `runs` is False
        when the result is known without running anything (a decision that is the result, an
        unknown tool, invalid arguments): there is then no "calling …" to show."""
        yield

    def tool_time_limit(self, tool: Tool) -> float | None:
        """How long one call of `tool` may run before it is stopped with an error result
        (None: no limit)."""
        return None

    def reraises(self, error: Exception) -> bool:
        """Whether a tool's exception is the run's problem rather than the tool's: the engine
        lets transient database errors through, so the step is retried instead of handing the
        model an error result."""
        return False

    def tool_result(
        self, frame: Frame, tool_use: dict[str, Any], content: str, is_error: bool, **extra: Any
    ) -> None:
        pass
