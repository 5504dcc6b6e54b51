"""Tools: their declaration, the registry, per-agent overrides and the built-ins."""

import dataclasses
import json
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any
from uuid import UUID

from jsonschema import Draft202012Validator
from jsonschema.exceptions import SchemaError

from agents.presentation import check_reject_reasons, check_summary
from agents.rules import PolicyError, check_keys
from agents.runtime.ladder import Ladder, build_ladder
from agents.runtime.time_limit import time_limit as limited

IMMEDIATE = "immediate"
BLOCKING = "blocking"
EXECUTION_MODES = (IMMEDIATE, BLOCKING)
ON_TIMEOUT = ("reject", "approve")
# A tool's stake (Tool.risk), lowest first.
RISKS = ("low", "normal", "high")
CONFIRMATION = "confirmation"
# What an agent file's tool_overrides may set of one tool (docs/agent-files.md lists them;
# tests/test_docs_reference.py keeps the page complete).
OVERRIDES = frozenset(
    {
        "execution_mode",
        "timeout",
        "on_timeout",
        "description",
        "reminders",
        "escalate_to",
        "escalate_at",
        "irreversible",
        "summary",
        "reject_reasons",
        "risk",
        *("reads_untrusted", "reads_private", "sends_outward"),
    }
)
INPUT = "input"


class ToolError(Exception):
    """Raised by a tool to hand the model an error result with this message."""


class ToolTimeLimit(ToolError):
    """Raised inside a tool that ran past its time limit: the model gets an error result."""

    def __init__(self, tool: str, seconds: float) -> None:
        super().__init__(
            f"Tool {tool} did not finish within its time limit ({seconds:g} s) and was "
            "stopped; it may have acted before it stopped."
        )


class ChildActivated(BaseException):
    """Raised by a tool that pushes a child frame.

    A BaseException so that it passes through the generic `except Exception` of tool
    dispatch; the loop catches it by name and returns CHILD_ACTIVATED.
    """

    def __init__(self, child_frame: Any) -> None:
        super().__init__(child_frame)
        self.child_frame = child_frame


@dataclass
class ToolContext:
    """What a running tool may know about the call."""

    tool_use_id: str
    frame: Any
    run: UUID | None = None  # the caller's handle on the run (the thread's id in the engine)
    # Looks agents up by name (subagents.AgentResolver), for use_skill/use_agent.
    agents: Callable[[str], Any] | None = None

    @property
    def idempotency_key(self) -> str:
        """The same for every attempt at this call, and for no other call (the tool_use id).

        A tool runs at least once: a worker killed while the tool runs leaves no result, and
        the call runs again from the start. A tool with outside effects passes this key to the
        outside system (or records it beside its effect) so that a second attempt is a no-op.
        """
        return self.tool_use_id


@dataclass(frozen=True)
class Tool:
    name: str
    description: str
    input_schema: dict[str, Any]
    func: Callable[[dict[str, Any], ToolContext], Any] | None = None
    execution_mode: str = IMMEDIATE
    timeout: int | None = None  # seconds a blocking call waits for a decision
    on_timeout: str = "reject"
    kind: str = CONFIRMATION  # what a blocking call asks of a person: a yes/no or an answer
    # Reminders and escalation before the deadline, as an agent file writes them
    # (agents.runtime.ladder); None: the tool leaves them to the agent.
    reminders: Any = None
    escalate_to: str | None = None
    escalate_at: Any = None
    # Who may decide a blocking call, and how (agents.policy): the tool's own default, which
    # an agent's policy overrides key by key.
    policy: dict[str, Any] | None = None
    # How a reviewer's card explains a call (agents.presentation): a summary template filled
    # with the call's arguments ("Transfer {amount} {currency} to {to_account}") and the
    # reasons offered for a rejection, beside free text.
    summary: str | None = None
    reject_reasons: tuple[str, ...] = ()
    # How much is at stake when it runs, as the tool's author judges it: the inbox filters
    # and marks requests by it (approvals.triage). It changes nothing about who may decide.
    risk: str = "normal"
    # Where its data comes from and goes (agents.history.taint): once a run has called a tool
    # that reads untrusted content (a web page, an inbound email) or private data, a call of
    # one that sends data out waits for a person, whatever a rule or a grant would decide.
    reads_untrusted: bool = False
    reads_private: bool = False
    sends_outward: bool = False
    # What it does cannot be undone (a payment sent, a record deleted): a reviewing model
    # (agents.reviewing) never decides its calls unless its setting says `irreversible: true`.
    irreversible: bool = False

    def __post_init__(self) -> None:
        if self.execution_mode not in EXECUTION_MODES:
            raise ValueError(
                f"{self.name}: execution_mode must be one of {EXECUTION_MODES}, "
                f"not {self.execution_mode!r}"
            )
        if self.on_timeout not in ON_TIMEOUT:
            raise ValueError(
                f"{self.name}: on_timeout must be one of {ON_TIMEOUT}, not {self.on_timeout!r}"
            )
        # bool is an int to Python, but `timeout: yes` in an agent file is a mistake.
        whole = isinstance(self.timeout, int) and not isinstance(self.timeout, bool)
        if self.timeout is not None and not (whole and self.timeout > 0):
            raise ValueError(
                f"{self.name}: timeout must be a positive whole number of seconds, "
                f"not {self.timeout!r}"
            )
        if not isinstance(self.description, str):
            raise ValueError(f"{self.name}: description must be text")
        try:
            self.ladder()
        except ValueError as e:
            raise ValueError(f"{self.name}: {e}") from e
        if self.policy is not None:
            try:
                check_keys(self.policy, "policy")
            except PolicyError as e:
                raise ValueError(f"{self.name}: {e}") from e
        try:
            Draft202012Validator.check_schema(self.input_schema)
        except SchemaError as e:
            raise ValueError(f"{self.name}: invalid input_schema: {e.message}") from e
        check_summary(self.summary, self.input_schema, self.name)
        if self.risk not in RISKS:
            raise ValueError(f"{self.name}: risk must be one of {RISKS}, not {self.risk!r}")
        for flag in ("reads_untrusted", "reads_private", "sends_outward"):
            if not isinstance(getattr(self, flag), bool):
                raise ValueError(f"{self.name}: {flag} must be true or false")
        if not isinstance(self.irreversible, bool):
            raise ValueError(f"{self.name}: irreversible must be true or false")
        # A list in an agent file: kept as a tuple, so the frozen tool stays hashable.
        object.__setattr__(
            self, "reject_reasons", check_reject_reasons(self.reject_reasons, self.name)
        )

    @property
    def blocking(self) -> bool:
        return self.execution_mode == BLOCKING

    def ladder(self) -> Ladder | None:
        """The tool's own reminders and escalation; None when it sets none (the agent's apply)."""
        if self.reminders is None and self.escalate_to is None and self.escalate_at is None:
            return None
        return build_ladder(self.reminders, self.escalate_to, self.escalate_at)

    def with_overrides(self, overrides: dict[str, Any]) -> "Tool":
        if not isinstance(overrides, dict):
            raise ValueError(f"{self.name}: overrides must be a mapping, like {{timeout: 120}}")
        unknown = set(overrides) - OVERRIDES
        if unknown:
            raise ValueError(f"{self.name}: unknown override(s) {sorted(unknown)}")
        if not overrides:
            return self  # frozen: the same tool (and no schema check again, on every step)
        return dataclasses.replace(self, **overrides)

    def api_schema(self) -> dict[str, Any]:
        """The tool as the Messages API's `tools` parameter wants it."""
        return {
            "name": self.name,
            "description": self.description,
            "input_schema": self.input_schema,
        }

    def validate(self, args: Any) -> dict[str, str]:
        """Field errors of `args` against the input schema, keyed by the field's path."""
        if not isinstance(args, dict):
            return {"": "arguments must be a JSON object"}
        errors: dict[str, str] = {}
        for error in Draft202012Validator(self.input_schema).iter_errors(args):
            path = ".".join(str(p) for p in error.absolute_path)
            if error.validator == "required":
                # "'amount' is a required property" names the field in the message only.
                field_name = error.message.split("'")[1] if "'" in error.message else ""
                path = ".".join(p for p in (path, field_name) if p)
            elif error.validator == "additionalProperties" and isinstance(error.instance, dict):
                # One message for all the extras; a reviewer's form needs each field named.
                known = set(error.schema.get("properties", {}))
                patterns = list(error.schema.get("patternProperties", {}))
                extras = [
                    k
                    for k in error.instance
                    if k not in known and not any(re.search(p, k) for p in patterns)
                ]
                for extra in sorted(extras):
                    errors.setdefault(".".join(p for p in (path, extra) if p), "Unknown field.")
                continue
            errors.setdefault(path, error.message)
        return errors

    def run(
        self, args: dict[str, Any], context: ToolContext, time_limit: float | None = None
    ) -> str:
        """The tool's result as text. Past `time_limit` seconds the call is stopped where it
        waits and ToolTimeLimit raised (agents.runtime.time_limit)."""
        if self.func is None:
            raise ToolError(f"{self.name} has no implementation")
        with limited(time_limit, lambda: ToolTimeLimit(self.name, time_limit or 0)):
            result = self.func(args, context)
        return result if isinstance(result, str) else json.dumps(result, default=str)


@dataclass
class ToolRegistry:
    tools: dict[str, Tool] = field(default_factory=dict)

    def register(self, tool: Tool) -> Tool:
        self.tools[tool.name] = tool
        return tool

    def get(self, name: str) -> Tool | None:
        return self.tools.get(name)

    def effective(self, names: list[str], overrides: dict[str, dict[str, Any]]) -> dict[str, Tool]:
        """The tools an agent may call, with its overrides applied; unknown names are skipped."""
        result = {}
        for name in names:
            tool = self.tools.get(name)
            if tool is not None:
                result[name] = tool.with_overrides(overrides.get(name, {}))
        return result

    def tool(
        self,
        name: str,
        *,
        description: str,
        input_schema: dict[str, Any],
        execution_mode: str = IMMEDIATE,
        timeout: int | None = None,
        on_timeout: str = "reject",
        kind: str = CONFIRMATION,
        reminders: Any = None,
        escalate_to: str | None = None,
        escalate_at: Any = None,
        policy: dict[str, Any] | None = None,
        summary: str | None = None,
        reject_reasons: tuple[str, ...] = (),
        risk: str = "normal",
        reads_untrusted: bool = False,
        reads_private: bool = False,
        sends_outward: bool = False,
        irreversible: bool = False,
    ) -> Callable[[Callable[[dict[str, Any], ToolContext], Any]], Tool]:
        """Declare a tool from a function of (args, context):

        @registry.tool("lookup_account", description="...", input_schema={...})
        def lookup_account(args, context): ...
        """

        def decorate(func: Callable[[dict[str, Any], ToolContext], Any]) -> Tool:
            return self.register(
                Tool(
                    name=name,
                    description=description,
                    input_schema=input_schema,
                    func=func,
                    execution_mode=execution_mode,
                    timeout=timeout,
                    on_timeout=on_timeout,
                    kind=kind,
                    reminders=reminders,
                    escalate_to=escalate_to,
                    escalate_at=escalate_at,
                    policy=policy,
                    summary=summary,
                    reject_reasons=reject_reasons,
                    risk=risk,
                    reads_untrusted=reads_untrusted,
                    reads_private=reads_private,
                    sends_outward=sends_outward,
                    irreversible=irreversible,
                )
            )

        return decorate


registry = ToolRegistry()

registry.register(
    Tool(
        name="displayConfirmation",
        description=(
            "Ask a human reviewer to confirm an action before you take it. Returns whether "
            "they approved, and their reason. Call it before any irreversible action."
        ),
        input_schema={
            "type": "object",
            "properties": {
                "action": {"type": "string", "description": "What you are about to do"},
                "details": {"type": "string", "description": "Anything the reviewer should know"},
            },
            "required": ["action"],
        },
        execution_mode=BLOCKING,
        kind=CONFIRMATION,
        summary="{action}",
    )
)

registry.register(
    Tool(
        name="ask_user",
        description="Ask the user a question and wait for the answer.",
        input_schema={
            "type": "object",
            "properties": {"question": {"type": "string"}},
            "required": ["question"],
        },
        execution_mode=BLOCKING,
        kind=INPUT,
        summary="{question}",
        # A question is put to whoever started the run: they are the one to answer it, so
        # four eyes, the default for blocking tools, does not apply to it.
        policy={"four_eyes": False},
    )
)
