"""The agent loop: run one frame until it needs someone (docs/how-it-works.md)."""

import json
import logging
from typing import Any, cast
from uuid import UUID

from agents.runtime import agent_tools
from agents.runtime import messages as msgs
from agents.runtime.llm import LLMError, LLMProvider, LLMRequest, LLMResponse
from agents.runtime.subagents import COMPLETE_TOOL, AgentResolver
from agents.runtime.tools import ChildActivated, Tool, ToolContext, ToolError, ToolRegistry
from agents.runtime.turn import BlockingCall, Decision, Frame, Hooks, TurnAction, TurnResult

log = logging.getLogger(__name__)

PAUSE_TURN = "pause_turn"


def decision_result(
    call: dict[str, Any], tool: Tool, decision: Decision
) -> tuple[str, bool] | None:
    """The tool_result a decision gives by itself, or None when the tool should now run."""
    who = decision.decided_by or "the reviewer"
    if decision.status == "timed_out" and not decision.approved:
        waited = f" within {tool.timeout} seconds" if tool.timeout else ""
        return (
            f"No reviewer decided on {tool.name}{waited}; the call was rejected automatically.",
            True,
        )
    if decision.status == "cancelled":
        return (f"The run was cancelled by {who}; {tool.name} did not run.", True)
    if decision.status == "responded":
        # The reviewer answered instead of deciding: marked as their words, and as an error
        # result, so the model does not take the call for done.
        return (
            f"Reviewer response from {who} ({tool.name} did not run; the reviewer answered "
            f"instead of approving or rejecting it): {decision.response or ''}",
            True,
        )
    if not decision.approved:
        reason = decision.reason.strip() or "no reason given"
        return (f"Rejected by {who}: {reason}. {tool.name} did not run.", True)
    if tool.kind == "input":
        return (decision.response or "", False)
    if tool.func is None:  # displayConfirmation: the decision is the result
        answer: dict[str, Any] = {"approved": True, "decided_by": who}
        if decision.status == "timed_out":
            answer["approved_automatically"] = True
        if decision.reason:
            answer["reason"] = decision.reason
        if decision.modified_args is not None and decision.modified_args != call["input"]:
            # The reviewer approved an edited version; the model must act on that one.
            answer["modifiedArgs"] = decision.modified_args
        return (json.dumps(answer), False)
    return None


def execute_turn(
    frame: Frame,
    *,
    llm: LLMProvider,
    tools: ToolRegistry,
    hooks: Hooks | None = None,
    decisions: dict[str, Decision] | None = None,
    user_message: str | None = None,
    tool_result: tuple[str, str, bool] | None = None,
    run: UUID | None = None,
    agents: AgentResolver | None = None,
    started: frozenset[str] = frozenset(),
) -> TurnResult:
    """Run `frame` until it answers with text, completes, pushes a child, suspends or fails.

    It starts from the unresolved tool uses of the last assistant message, if any, so a
    resumed frame never runs a tool twice. `decisions` answers blocking calls by tool_use id.
    `run` and `agents` reach the tools through their ToolContext.

    Agents as tools: a call of `agent__<name>` is not run here. The turn returns FAN_OUT while
    such calls have no instance, so the caller starts one per call (each runs on its own) and
    calls again with their tool_use ids in `started`; the other calls of the message then run
    or suspend as usual, and the turn returns WAITING when only started instances are left.
    Their results come back as tool_results the caller adds; the model gets every result in
    the order of the calls.
    """
    hooks = hooks or Hooks()
    decisions = decisions or {}
    if user_message is not None:
        msgs.add_user_text(frame.messages, user_message)
        frame.iteration = 0
    elif tool_result is not None:
        msgs.add_tool_result(frame.messages, *tool_result)
    available = tools.effective(frame.tools, frame.tool_overrides)
    for name in frame.tools:
        child = agent_tools.agent_of(name)
        if child is not None and name not in available:
            spec = agents(child) if agents is not None else None
            if spec is not None:
                available[name] = agent_tools.make_tool(spec)
    if frame.agent_type != "main":
        complete = tools.get(COMPLETE_TOOL)
        if complete is not None:
            available[COMPLETE_TOOL] = complete

    while True:
        pending = msgs.unresolved_tool_uses(frame.messages)
        if not pending:
            if frame.iteration >= frame.max_iterations:
                return TurnResult(
                    TurnAction.MAX_ITERATIONS,
                    text=(
                        f"Agent '{frame.agent_name}' stopped: it reached its limit of "
                        f"{frame.max_iterations} model calls without finishing."
                    ),
                )
            frame.iteration += 1
            msgs.order_results(frame.messages)
            request = LLMRequest(
                agent_name=frame.agent_name,
                model=frame.model,
                system=frame.system_prompt,
                messages=frame.messages,
                tools=[t.api_schema() for t in available.values()],
                max_tokens=frame.max_tokens,
            )
            listener = hooks.listener(frame)
            try:
                if listener is None:
                    response = llm.complete(request)
                else:
                    response = llm.complete(request, listener)
            except LLMError as e:
                return TurnResult(TurnAction.ERROR, text=str(e))
            if frame.messages and frame.messages[-1].get("role") == "assistant":
                # The previous answer was paused (pause_turn): this one continues the same turn.
                frame.messages[-1]["content"] = msgs.blocks(frame.messages[-1]) + response.content
            else:
                frame.messages.append({"role": "assistant", "content": response.content})
            hooks.llm_responded(frame, response)
            stopped = _stop_error(frame, response)
            if stopped:
                return TurnResult(TurnAction.ERROR, text=stopped)
            if response.stop_reason == PAUSE_TURN:
                continue
            pending = msgs.tool_uses(response.content)
            if not pending:
                # The whole message: after a pause_turn, the answer began in the paused part.
                said = msgs.text_of(frame.messages[-1]["content"])
                return TurnResult(TurnAction.SEND_TEXT, text=said)

        # Pending tool uses come from an assistant message, so there is one.
        last = cast(int, msgs.last_assistant_index(frame.messages))
        assistant = frame.messages[last]["content"]
        if any(_is_instance(u, available) and u["id"] not in started for u in pending):
            return TurnResult(TurnAction.FAN_OUT)
        for position, use in enumerate(pending):
            if use["id"] in started:
                continue  # an instance runs it
            if use["name"] == COMPLETE_TOOL and COMPLETE_TOOL in available:
                return TurnResult(TurnAction.COMPLETE, text=str(use["input"].get("result", "")))
            tool = available.get(use["name"])
            if tool is None:
                if agent_tools.agent_of(use["name"]) is not None:
                    unknown = agent_tools.unknown_message(use["name"])
                else:
                    unknown = f"Unknown tool '{use['name']}'."
                _record(frame, hooks, use, unknown, True)
                continue
            if tool.blocking and use["id"] not in decisions:
                errors = tool.validate(use["input"])
                if errors:
                    _record(frame, hooks, use, _invalid(tool, errors), True)
                    continue
                group = _blocking_group(pending[position:], available, decisions, assistant)
                return TurnResult(TurnAction.SUSPENDED, blocking=group)
            decision = decisions.get(use["id"])
            args = use["input"]
            note = ""
            if decision is not None:
                given = decision_result(use, tool, decision)
                if given is not None:
                    _record(frame, hooks, use, given[0], given[1], decision=decision)
                    continue
                if decision.modified_args is not None:
                    args = decision.modified_args
                    note = (
                        f"Note: {decision.decided_by or 'the reviewer'} edited the arguments "
                        f"before approving; it ran with {json.dumps(args)}.\n"
                    )
            try:
                context = ToolContext(use["id"], frame, run, agents)
                _run(frame, hooks, use, tool, args, note, context, decision)
            except ChildActivated as activated:
                return TurnResult(TurnAction.CHILD_ACTIVATED, child_frame=activated.child_frame)
        if msgs.unresolved_tool_uses(frame.messages):
            # Every call left is an instance still running: the frame waits for their results.
            return TurnResult(TurnAction.WAITING)


def _is_instance(use: dict[str, Any], available: dict[str, Tool]) -> bool:
    return use["name"] in available and agent_tools.agent_of(use["name"]) is not None


def _stop_error(frame: Frame, response: LLMResponse) -> str:
    """Why the answer cannot be used, by its stop_reason; empty when it can.

    end_turn, stop_sequence and tool_use answers are used as they are; pause_turn is sent back
    to let the model continue. An answer cut off by a token limit may hold a tool call with
    half its input, and its text is not the whole answer, so nothing of it runs. A refusal is
    not an answer either.
    """
    name = frame.agent_name
    if response.stop_reason == "max_tokens":
        return (
            f"Agent '{name}' stopped: the model's answer was cut off at its limit of "
            f"{frame.max_tokens} output tokens (max_tokens in the agent file)."
        )
    if response.stop_reason == "model_context_window_exceeded":
        return (
            f"Agent '{name}' stopped: the conversation filled the model's context window, so "
            "its answer was cut off."
        )
    if response.stop_reason == "refusal":
        why = f": {response.stop_detail.rstrip('.')}" if response.stop_detail else ""
        return f"Agent '{name}' stopped: the model declined to continue{why}."
    return ""


def _invalid(tool: Tool, errors: dict[str, str]) -> str:
    listed = "; ".join(f"{k or 'input'}: {v}" for k, v in errors.items())
    return f"Invalid input for {tool.name}: {listed}"


def _blocking_group(
    rest: list[dict[str, Any]],
    available: dict[str, Tool],
    decisions: dict[str, Decision],
    assistant: list[dict[str, Any]],
) -> list[BlockingCall]:
    """Every undecided, valid blocking call left in the message: one group, decided side by side."""
    group = []
    for use in rest:
        tool = available.get(use["name"])
        if tool is None or not tool.blocking or use["id"] in decisions:
            continue
        if tool.validate(use["input"]):
            continue
        group.append(
            BlockingCall(
                tool_use_id=use["id"],
                tool=tool,
                input=use["input"],
                preceding_text=msgs.text_before(assistant, use["id"]),
            )
        )
    return group


def _record(
    frame: Frame,
    hooks: Hooks,
    use: dict[str, Any],
    content: str,
    is_error: bool,
    **extra: Any,
) -> None:
    with hooks.tool_scope(frame, use, runs=False):
        msgs.add_tool_result(frame.messages, use["id"], content, is_error)
        hooks.tool_result(frame, use, content, is_error, **extra)


def _run(
    frame: Frame,
    hooks: Hooks,
    use: dict[str, Any],
    tool: Tool,
    args: dict[str, Any],
    note: str,
    context: ToolContext,
    decision: Decision | None,
) -> None:
    # A ChildActivated raised by the tool leaves this block without a result: nothing is
    # recorded, the tool use stays unresolved, and the engine saves the frame together with
    # the child it pushes (Run._push), so the call is never left without one.
    with hooks.tool_scope(frame, use):
        errors = tool.validate(args)
        if errors:
            content, is_error = _invalid(tool, errors), True
        else:
            try:
                content = tool.run(args, context, hooks.tool_time_limit(tool))
                is_error = False
            except ToolError as e:
                content, is_error = str(e), True
            except Exception as e:
                if hooks.reraises(e):
                    raise
                log.exception("tool %s failed", tool.name)
                content, is_error = f"Tool {tool.name} failed: {type(e).__name__}: {e}", True
        content = note + content
        msgs.add_tool_result(frame.messages, use["id"], content, is_error)
        hooks.tool_result(frame, use, content, is_error, decision=decision, args=args)
