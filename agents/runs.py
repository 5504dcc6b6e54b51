"""One worker's hold on a thread or a lane: the loop over its stack, and how the run ends."""

import contextlib
import logging
from collections.abc import Iterator
from datetime import timedelta
from typing import TYPE_CHECKING, Any

from django.conf import settings
from django.db import InterfaceError, OperationalError, transaction

from agents import events, statements
from agents.checkpoints import Checkpoints
from agents.instances import InstanceSteps
from agents.leases import LeaseLost
from agents.models import AgentDefinition, Event, StackFrame, Thread
from agents.providers import Streaming, default_provider
from agents.replies import input_rules
from agents.runtime import agent_tools
from agents.runtime import messages as msgs
from agents.runtime.llm import SCRIPTED, LLMProvider, ScriptedProvider, StreamListener
from agents.runtime.loop import execute_turn
from agents.runtime.subagents import failure_for_parent
from agents.runtime.tools import Tool
from agents.runtime.turn import Frame, Hooks, TurnAction, TurnResult
from agents.stack import StackSteps, to_runtime
from agents.streaming import LiveWriter
from agents.suspending import SuspendSteps

if TYPE_CHECKING:
    from agents.engine import Engine

log = logging.getLogger(__name__)

ACTIVE = StackFrame.Status.ACTIVE


class Run(Checkpoints, SuspendSteps, InstanceSteps, StackSteps, Hooks):
    """One worker's hold on one thread: the orchestration loop and its checkpoints."""

    def __init__(
        self, engine: "Engine", thread: Thread, owner: str, lane: StackFrame | None = None
    ) -> None:
        self.engine = engine
        self.thread = thread
        self.owner = owner
        # The agent instance whose lane this run drives (its frame and the sub-agents it
        # pushed), under the instance's lease; None: the thread's main stack.
        self.lane = lane
        self.live: LiveWriter | None = None
        self.row: StackFrame | None = None
        self.buffered: list[Event] = []
        self.resumed: list[Any] = []
        self.released = False  # a committed status change gave the lease back
        self.unsaved_answer = False  # an LLM answer not yet written to the frame's row

    # The orchestration loop -------------------------------------------------------------

    def drive(self) -> None:
        try:
            self._loop()
        finally:
            if self.live is not None:
                self.live.close()

    def _stack(self) -> list[StackFrame]:
        frames = statements.active_stack(
            self.thread.pk, self.lane.pk if self.lane is not None else None
        )
        for frame in frames:
            frame.thread = self.thread  # as the related manager's rows have it
        return frames

    def _loop(self) -> None:
        while True:
            stack = self._stack()
            if not stack:
                if self.lane is not None:
                    log.info("instance %s has nothing left to run", self.lane.pk)
                    return
                log.warning("thread %s is running with an empty stack", self.thread.pk)
                self._finish(
                    Thread.Status.FAILED,
                    Event.Type.THREAD_FAILED,
                    error="The agent stack was empty.",
                )
                return
            self.row = stack[-1]
            if self.live is None or self.live.frame_id != self.row.pk:
                if self.live is not None:
                    self.live.close()
                self.live = LiveWriter(self.thread.pk, self.row.pk)
            frame = to_runtime(self.row)
            started = self._collect(frame)
            decisions = self._decisions(frame)
            result = execute_turn(
                frame,
                llm=self._provider(frame),
                tools=self.engine.tools,
                hooks=self,
                decisions=decisions,
                run=self.thread.pk,
                agents=self.engine.agents,
                started=started,
            )
            try:
                go_on = self._handle(frame, result, stack)
            except AssertionError as e:
                # A programming bug (a child without its parent's tool use, say): running the
                # thread again cannot help, so it fails visibly instead of being retried.
                log.error("thread %s: %s", self.thread.pk, e)
                error = f"Internal error: {e}"
                failed = Thread.Status.FAILED
                self._finish(failed, Event.Type.THREAD_FAILED, frame=frame, error=error)
                return
            if not go_on:
                return

    def _provider(self, frame: Frame) -> LLMProvider:
        agent = self.thread.agent
        if (
            self.engine.provider is default_provider
            and frame.model == SCRIPTED
            and frame.agent_name == agent.name
        ):
            provider: LLMProvider = ScriptedProvider(agent.script or [])  # no query
            stream = agent.stream
        else:
            provider = self.engine.provider(frame)
            stream = frame.model != SCRIPTED or bool(
                AgentDefinition.objects.filter(name=frame.agent_name)
                .values_list("stream", flat=True)
                .first()
            )
        return Streaming(provider, stream)

    def _handle(self, frame: Frame, result: TurnResult, stack: list[StackFrame]) -> bool:
        """Persist what the turn ended with; True when the loop should go on."""
        row = self.row
        is_main = row.agent_type == StackFrame.Type.MAIN
        is_instance = self.lane is not None and row.pk == self.lane.pk
        if result.action == TurnAction.SUSPENDED:
            return self._suspend(frame, result, stack)
        if result.action == TurnAction.FAN_OUT:
            self._fan_out(frame)
            return True
        if result.action == TurnAction.WAITING:
            return self._wait_for_instances(frame)
        if result.action == TurnAction.CHILD_ACTIVATED:
            self._push(frame, result.child_frame, stack)
            return True
        if is_instance and result.action in (TurnAction.SEND_TEXT, TurnAction.COMPLETE):
            # An instance talks to nobody: its answer (or its complete) is its call's result.
            self._finish_instance(frame, result.text, is_error=False)
            return False
        if is_instance:  # MAX_ITERATIONS or ERROR
            self._finish_instance(frame, agent_tools.error_message(result.text), is_error=True)
            return False
        if result.action == TurnAction.SEND_TEXT:
            if is_main:
                self._finish(
                    Thread.Status.COMPLETED,
                    Event.Type.THREAD_COMPLETED,
                    frame=frame,
                    result=result.text,
                )
            elif self.lane is not None:
                # A sub-agent inside an instance has no user to talk to: its answer is its result.
                return self._pop(frame, stack, result.text, is_error=False)
            else:
                self._wait_for_input(frame, result.text)
            return False
        if result.action == TurnAction.COMPLETE:
            return self._pop(frame, stack, result.text, is_error=False)
        # MAX_ITERATIONS or ERROR: the main frame fails the thread; a child cascades to its parent.
        if is_main:
            self._finish(
                Thread.Status.FAILED, Event.Type.THREAD_FAILED, frame=frame, error=result.text
            )
            return False
        return self._pop(frame, stack, failure_for_parent(frame, result.text), is_error=True)

    # Hooks: what execute_turn reports -----------------------------------------------------

    def listener(self, frame: Frame) -> StreamListener | None:
        return self.live

    def llm_responded(self, frame: Frame, response: Any) -> None:
        self.unsaved_answer = True
        usage = getattr(response, "usage", None)
        if usage is not None:
            self.row.input_tokens += usage.input_tokens
            self.row.output_tokens += usage.output_tokens
        self.row.tools_used = [
            *self.row.tools_used,
            *(u["name"] for u in msgs.tool_uses(response.content)),
        ]
        text = msgs.text_of(response.content)
        if text:
            self._buffer(Event.Type.AGENT_MESSAGE, {"text": text, **self._where()})
        for use in msgs.tool_uses(response.content):
            self._buffer(
                Event.Type.TOOL_CALLED,
                {
                    "tool": use["name"],
                    "input": use["input"],
                    "tool_use_id": use["id"],
                    **self._where(),
                },
            )

    @contextlib.contextmanager
    def tool_scope(
        self, frame: Frame, tool_use: dict[str, Any], runs: bool = True
    ) -> Iterator[None]:
        if self.unsaved_answer or (runs and self.lane is not None):
            # The call's tool_use id is its idempotency key: it must be stored before the tool
            # acts, or a crash would make the model ask again under a new id.
            with transaction.atomic():
                self._renew(tool_use["name"] if runs else "")
                if self.unsaved_answer:
                    self._save(frame)
        elif runs:
            # The tool that runs is on the thread's row, so a cancel waits for its result
            # (agents.cancelling); LeaseLost: cancelled meanwhile, it does not run.
            self._renew(tool_use["name"])
        # The live line says which tool runs; a result known without running one (a decision
        # that is the result) would show it for no time at all, at two writes and wake-ups.
        shown = runs and self.live is not None
        if shown:
            self.live.activity(f"calling {tool_use['name']}…")
        yield  # the tool runs here, outside any transaction
        if shown:
            self.live.activity("")
        with transaction.atomic():
            # LeaseLost: cancelled before the tool ran, or taken over, the result is dropped;
            # a cancel that waited for this tool takes its result, then the run stops.
            cancelled = self._tool_returned(frame)
        if cancelled:
            self.released = True
            raise LeaseLost(self.thread.pk)

    def tool_time_limit(self, tool: Tool) -> float | None:
        return settings.TOOL_TIME_LIMIT_SECONDS

    def reraises(self, error: Exception) -> bool:
        # A cancelled statement, a lock or statement timeout, a deadlock, a dropped
        # connection: the step is retried by the task (agents.tasks), not failed.
        return isinstance(error, (OperationalError, InterfaceError))

    def tool_result(
        self, frame: Frame, tool_use: dict[str, Any], content: str, is_error: bool, **extra: Any
    ) -> None:
        payload = {
            "tool": tool_use["name"],
            "tool_use_id": tool_use["id"],
            "content": content,
            "is_error": is_error,
            **self._where(),
        }
        decision = extra.get("decision")
        if decision is not None:
            payload["decision"] = decision.status
        self._buffer(Event.Type.TOOL_RESULT, payload)

    def _wait_for_input(self, frame: Frame, text: str) -> None:
        """The frame answered with text and no tool call: the user is asked (seed
        input-required-conversations §2), under the asking agent's input rules."""
        rules = input_rules(AgentDefinition.objects.filter(name=frame.agent_name).first())
        now = self.engine.clock()
        expires = now + timedelta(seconds=rules.timeout) if rules.timeout else None
        with transaction.atomic():
            self._renew()
            self._save(frame)
            events.record(
                Event.Type.THREAD_WAITING,
                thread_id=self.thread.pk,
                payload={"text": text, **self._where()},
            )
            events.record(
                Event.Type.INPUT_REQUIRED,
                thread_id=self.thread.pk,
                payload={
                    "prompt": text,
                    "input_types": list(rules.types),
                    "max_chars": rules.max_chars,
                    "expires_at": expires.isoformat() if expires else None,
                    "on_timeout": rules.on_timeout,
                    **self._where(),
                },
            )
            self.thread.input_prompt = text
            self.thread.input_expires_at = expires
            self._close_live()
            self._set_status(
                Thread.Status.WAITING_INPUT, extra=["input_prompt", "input_expires_at"]
            )
        self.released = True

    def fail_unexpectedly(self, error: Exception) -> None:
        if self.lane is not None:
            self._fail_instance(error)
            return
        with transaction.atomic():
            n = Thread.objects.filter(
                pk=self.thread.pk, lease_owner=self.owner, status=Thread.Status.RUNNING
            ).update(
                status=Thread.Status.FAILED,
                error=f"Internal error: {type(error).__name__}: {error}",
            )
            if n:
                events.record(
                    Event.Type.THREAD_FAILED,
                    thread_id=self.thread.pk,
                    payload={
                        "status": Thread.Status.FAILED,
                        "result": "",
                        "error": f"Internal error: {type(error).__name__}: {error}",
                    },
                )

    def _finish(
        self,
        status: str,
        event_type: str,
        frame: Frame | None = None,
        result: str = "",
        error: str = "",
    ) -> None:
        ended = {"status": status, "result": result, "error": error, "stack": []}
        self.thread.result = result
        self.thread.error = error
        with transaction.atomic():
            if self.lane is None:
                self._end(status)
            else:
                self._renew()
            if frame is not None:
                self.row.status = (
                    StackFrame.Status.COMPLETED
                    if status == Thread.Status.COMPLETED
                    else StackFrame.Status.FAILED
                )
                self.row.result = result or error
                # The thread's last event goes after the frame's own, in the same statement;
                # the frame's final status in the same update as its messages.
                self._buffer(event_type, ended)
                self._save(frame, ended=True)
            if frame is None or self.row.depth > 0:
                # A failure ends the frames below the top too: the thread has no stack left.
                self.thread.frames.filter(status=ACTIVE).update(
                    status=StackFrame.Status.FAILED, updated_at=self.engine.clock()
                )
            if frame is None:
                events.record(event_type, thread_id=self.thread.pk, payload=ended)
            self._close_live(alone=False)
            if self.lane is not None:
                self._set_status(status, extra=["result", "error"])
        self.released = True
