"""One worker's hold on a thread or a lane: the loop over its stack, and how the run ends.

The run is made of collaborators that own their state and work on the step (agents.step.Step:
the thread, the lane, the frame on top and its live line): the lease (agents.leases.Lease),
the checkpoint (agents.checkpoints.Checkpoint), the stack (agents.stack.Stack), the
suspensions of a frame (agents.suspending.Suspensions) and its instances
(agents.instances.Instances). The run itself is the loop and the hooks that execute_turn calls.
"""

import contextlib
import logging
from collections.abc import Iterator
from datetime import timedelta
from typing import TYPE_CHECKING, Any

from django.conf import settings
from django.db import InterfaceError, OperationalError, transaction

from agents import dispatch, events
from agents.checkpoints import Checkpoint
from agents.instances import Instances
from agents.leases import Lease, LeaseLost
from agents.models import AgentDefinition, Event, StackFrame, Thread
from agents.providers import Streaming, default_provider
from agents.replies import input_rules
from agents.runtime import agent_tools
from agents.runtime import messages as msgs
from agents.runtime.llm import SCRIPTED, LLMProvider, ScriptedProvider, StreamListener
from agents.runtime.loop import execute_turn
from agents.runtime.subagents import failure_for_parent, result_for_parent
from agents.runtime.tools import Tool
from agents.runtime.turn import Frame, Hooks, TurnAction, TurnResult
from agents.stack import Stack, to_runtime
from agents.step import Step
from agents.streaming import LiveWriter
from agents.suspending import Suspensions

if TYPE_CHECKING:
    from agents.engine import Engine

log = logging.getLogger(__name__)

ACTIVE = StackFrame.Status.ACTIVE


class Run(Hooks):
    """One worker's hold on one thread (or lane): the orchestration loop, and the hooks
    through which execute_turn reports to it."""

    def __init__(
        self, engine: "Engine", thread: Thread, lease: Lease, lane: StackFrame | None = None
    ) -> None:
        self.engine = engine
        self.step = Step(thread, lane)
        self.lease = lease
        self.checkpoint = Checkpoint(lease)
        self.stack = Stack(lease, self.checkpoint)
        self.suspensions = Suspensions(lease, self.checkpoint)
        self.instances = Instances(lease, self.checkpoint, engine.agents)

    @property
    def released(self) -> bool:
        """A committed status change gave the lease back."""
        return self.lease.released

    # The orchestration loop -------------------------------------------------------------

    def drive(self) -> None:
        try:
            self._loop()
        finally:
            if self.step.live is not None:
                self.step.live.close()

    def _loop(self) -> None:
        step = self.step
        while True:
            stack = self.stack.load(step)
            if not stack:
                if step.lane is not None:
                    log.info("instance %s has nothing left to run", step.lane.pk)
                    return
                if not Thread.objects.filter(
                    pk=step.thread.pk, status=Thread.Status.RUNNING
                ).exists():
                    # A cancel won after this worker claimed the thread: it unwound the stack
                    # and ended the run, which is nothing to warn anyone about.
                    log.info("thread %s ended while it was claimed", step.thread.pk)
                    return
                log.warning("thread %s is running with an empty stack", step.thread.pk)
                self._finish(
                    Thread.Status.FAILED,
                    Event.Type.THREAD_FAILED,
                    error="The agent stack was empty.",
                )
                return
            step.row = stack[-1]
            if step.live is None or step.live.frame_id != step.row.pk:
                if step.live is not None:
                    step.live.close()
                step.live = LiveWriter(step.thread.pk, step.row.pk)
            frame = to_runtime(step.row)
            started = self.instances.collect(step, frame)
            decisions = self.suspensions.decisions(step, frame)
            result = execute_turn(
                frame,
                llm=self._provider(frame),
                tools=self.engine.tools,
                hooks=self,
                decisions=decisions,
                run=step.thread.pk,
                agents=self.engine.agents,
                started=started,
            )
            try:
                go_on = self._handle(frame, result, stack)
            except AssertionError as e:
                # A programming bug (a child without its parent's tool use, say): running the
                # thread again cannot help, so it fails visibly instead of being retried.
                log.error("thread %s: %s", step.thread.pk, e)
                error = f"Internal error: {e}"
                failed = Thread.Status.FAILED
                self._finish(failed, Event.Type.THREAD_FAILED, frame=frame, error=error)
                return
            if not go_on:
                return

    def _provider(self, frame: Frame) -> LLMProvider:
        agent = self.step.thread.agent
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
        step = self.step
        row = step.row
        is_main = row.agent_type == StackFrame.Type.MAIN
        is_instance = step.lane is not None and row.pk == step.lane.pk
        if result.action == TurnAction.SUSPENDED:
            return self.suspensions.suspend(step, frame, result, stack)
        if result.action == TurnAction.FAN_OUT:
            self.instances.fan_out(step, frame)
            return True
        if result.action == TurnAction.WAITING:
            return self.instances.wait(step, frame)
        if result.action == TurnAction.CHILD_ACTIVATED:
            assert result.child_frame is not None
            self.stack.push(step, frame, result.child_frame, stack)
            return True
        if is_instance and result.action in (TurnAction.SEND_TEXT, TurnAction.COMPLETE):
            # An instance talks to nobody: its answer (or its complete) is its call's result.
            self.instances.finish(step, frame, result.text, is_error=False)
            return False
        if is_instance:  # MAX_ITERATIONS or ERROR
            text = agent_tools.error_message(result.text)
            self.instances.finish(step, frame, text, is_error=True)
            return False
        if result.action == TurnAction.SEND_TEXT:
            if is_main:
                self._finish(
                    Thread.Status.COMPLETED,
                    Event.Type.THREAD_COMPLETED,
                    frame=frame,
                    result=result.text,
                )
            elif step.lane is not None:
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

    def _pop(self, frame: Frame, stack: list[StackFrame], text: str, is_error: bool) -> bool:
        """The top frame ends; its result (or error) becomes its parent's tool_result.

        Returns whether the loop goes on: not when no frame was left below to take the result.
        """
        returned = result_for_parent(frame, text, is_error)
        if len(stack) < 2:
            label = self.step.row.label
            log.warning("thread %s: %s ended with no frame below it", self.step.thread.pk, label)
            _, content, failed = returned
            if failed:
                status = Thread.Status.FAILED
                self._finish(status, Event.Type.THREAD_FAILED, frame=frame, error=content)
            else:
                done = Thread.Status.COMPLETED
                self._finish(done, Event.Type.THREAD_COMPLETED, frame=frame, result=content)
            return False
        self.stack.pop(self.step, frame, stack, returned)
        return True

    # Hooks: what execute_turn reports -----------------------------------------------------

    def listener(self, frame: Frame) -> StreamListener | None:
        return self.step.live

    def llm_responded(self, frame: Frame, response: Any) -> None:
        step, checkpoint = self.step, self.checkpoint
        checkpoint.unsaved_answer = True
        usage = getattr(response, "usage", None)
        if usage is not None:
            step.row.input_tokens += usage.input_tokens
            step.row.output_tokens += usage.output_tokens
        step.row.tools_used = [
            *step.row.tools_used,
            *(u["name"] for u in msgs.tool_uses(response.content)),
        ]
        text = msgs.text_of(response.content)
        if text:
            checkpoint.buffer(step, Event.Type.AGENT_MESSAGE, {"text": text, **step.where()})
        for use in msgs.tool_uses(response.content):
            checkpoint.buffer(
                step,
                Event.Type.TOOL_CALLED,
                {
                    "tool": use["name"],
                    "input": use["input"],
                    "tool_use_id": use["id"],
                    **step.where(),
                },
            )

    @contextlib.contextmanager
    def tool_scope(
        self, frame: Frame, tool_use: dict[str, Any], runs: bool = True
    ) -> Iterator[None]:
        step, checkpoint = self.step, self.checkpoint
        if checkpoint.unsaved_answer or (runs and step.lane is not None):
            # The call's tool_use id is its idempotency key: it must be stored before the tool
            # acts, or a crash would make the model ask again under a new id.
            with transaction.atomic():
                self.lease.renew(step, tool_use["name"] if runs else "")
                if checkpoint.unsaved_answer:
                    checkpoint.save(step, frame)
        elif runs:
            # The tool that runs is on the thread's row, so a cancel waits for its result
            # (agents.cancelling); LeaseLost: cancelled meanwhile, it does not run.
            self.lease.renew(step, tool_use["name"])
        # The live line says which tool runs; a result known without running one (a decision
        # that is the result) would show it for no time at all, at two writes and wake-ups.
        live = step.live if runs else None
        if live is not None:
            live.activity(f"calling {tool_use['name']}…")
        yield  # the tool runs here, outside any transaction
        if live is not None:
            live.activity("")
        with transaction.atomic():
            # LeaseLost: cancelled before the tool ran, or taken over, the result is dropped;
            # a cancel that waited for this tool takes its result, then the run stops.
            cancelled = checkpoint.tool_returned(step, frame)
        if cancelled:
            self.lease.released = True
            raise LeaseLost(step.thread.pk)

    def tool_time_limit(self, tool: Tool) -> float | None:
        return settings.TOOL_TIME_LIMIT_SECONDS

    def reraises(self, error: Exception) -> bool:
        # A cancelled statement, a lock or statement timeout, a deadlock, a dropped
        # connection: the step is retried by the task (agents.tasks), not failed.
        return isinstance(error, (OperationalError, InterfaceError))

    def tool_result(
        self, frame: Frame, tool_use: dict[str, Any], content: str, is_error: bool, **extra: Any
    ) -> None:
        self.checkpoint.tool_result(
            self.step, tool_use, content, is_error, decision=extra.get("decision")
        )

    def _wait_for_input(self, frame: Frame, text: str) -> None:
        """The frame answered with text and no tool call: the user is asked (seed
        input-required-conversations §2), under the asking agent's input rules."""
        rules = input_rules(AgentDefinition.objects.filter(name=frame.agent_name).first())
        step = self.step
        now = self.engine.clock()
        expires = now + timedelta(seconds=rules.timeout) if rules.timeout else None
        with transaction.atomic():
            self.lease.renew(step)
            self.checkpoint.save(step, frame)
            events.record(
                Event.Type.THREAD_WAITING,
                thread_id=step.thread.pk,
                payload={"text": text, **step.where()},
            )
            events.record(
                Event.Type.INPUT_REQUIRED,
                thread_id=step.thread.pk,
                payload={
                    "prompt": text,
                    "input_types": list(rules.types),
                    "max_chars": rules.max_chars,
                    "expires_at": expires.isoformat() if expires else None,
                    "on_timeout": rules.on_timeout,
                    **step.where(),
                },
            )
            step.thread.input_prompt = text
            step.thread.input_expires_at = expires
            if expires is not None and rules.timeout <= settings.SWEEP_IDLE_SECONDS:
                # It may fall before the clock next wakes (agents.due).
                dispatch.at_deadline(dispatch.EXPIRE_INPUT, step.thread.pk, expires)
            step.close_live()
            self.lease.give_back(
                step, Thread.Status.WAITING_INPUT, extra=["input_prompt", "input_expires_at"]
            )
        self.lease.released = True

    def fail_unexpectedly(self, error: Exception) -> None:
        if self.step.lane is not None:
            self.instances.fail(self.step, error)
            return
        with transaction.atomic():
            n = Thread.objects.filter(
                pk=self.step.thread.pk, lease_owner=self.lease.owner, status=Thread.Status.RUNNING
            ).update(
                status=Thread.Status.FAILED,
                error=f"Internal error: {type(error).__name__}: {error}",
            )
            if n:
                events.record(
                    Event.Type.THREAD_FAILED,
                    thread_id=self.step.thread.pk,
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
        step = self.step
        ended = {"status": status, "result": result, "error": error, "stack": []}
        step.thread.result = result
        step.thread.error = error
        with transaction.atomic():
            if step.lane is None:
                self.lease.end(step, status)
            else:
                self.lease.renew(step)
            if frame is not None:
                step.row.status = (
                    StackFrame.Status.COMPLETED
                    if status == Thread.Status.COMPLETED
                    else StackFrame.Status.FAILED
                )
                step.row.result = result or error
                # The thread's last event goes after the frame's own, in the same statement;
                # the frame's final status in the same update as its messages.
                self.checkpoint.buffer(step, event_type, ended)
                self.checkpoint.save(step, frame, ended=True)
            if frame is None or step.row.depth > 0:
                # A failure ends the frames below the top too: the thread has no stack left.
                step.thread.frames.filter(status=ACTIVE).update(
                    status=StackFrame.Status.FAILED, updated_at=self.engine.clock()
                )
            if frame is None:
                events.record(event_type, thread_id=step.thread.pk, payload=ended)
            step.close_live(alone=False)
            if step.lane is not None:
                self.lease.give_back(step, status, extra=["result", "error"])
        self.lease.released = True
