"""The worker's side: take a thread, run its stack until it needs someone, save every step.

`advance(thread_id)` is what the Celery tasks call. It claims the thread with a lease (a
conditional update, so at most one worker runs a thread: invariant 3), then loops over the
stack as the seed's orchestration loop does, without recursion. Every tool runs inside the
transaction that records its result, so a thread resumed after a crash never runs a tool
twice; an LLM answer is saved with the next step's transaction.
"""

import contextlib
import functools
import logging
import uuid
from collections.abc import Callable, Iterator
from datetime import timedelta
from typing import Any

from django.conf import settings
from django.db import InterfaceError, OperationalError, transaction
from django.utils import timezone

from agents import events
from agents.actions import find_agent, suspension_payload
from agents.models import AgentDefinition, Event, StackFrame, Suspension, Thread
from agents.runtime import messages as msgs
from agents.runtime.llm import SCRIPTED, AnthropicProvider, LLMProvider, ScriptedProvider
from agents.runtime.loop import Decision, Frame, Hooks, TurnAction, TurnResult, execute_turn
from agents.runtime.subagents import AgentResolver, failure_for_parent, result_for_parent
from agents.runtime.tools import ToolRegistry
from agents.runtime.tools import registry as default_registry

log = logging.getLogger(__name__)

ACTIVE = StackFrame.Status.ACTIVE


class LeaseLost(Exception):
    """Another worker took the thread over, or it was cancelled: stop without writing."""


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


class Engine:
    """Runs threads. What a test must control is an attribute: the tools, the LLM, the clock,
    and where use_skill/use_agent look agents up."""

    def __init__(
        self,
        tools: ToolRegistry | None = None,
        provider: Callable[[Frame], LLMProvider] = default_provider,
        clock: Callable[[], Any] = timezone.now,
        agents: AgentResolver = find_agent,
    ) -> None:
        self.tools = tools or default_registry
        self.provider = provider
        self.clock = clock
        self.agents = agents

    def advance(self, thread_id: Any) -> bool:
        """Run the thread if it is runnable and free; returns whether this call ran it."""
        owner = uuid.uuid4().hex
        now = self.clock()
        claimed = (
            Thread.objects.filter(pk=thread_id, status=Thread.Status.RUNNING)
            .exclude(lease_expires_at__gt=now)
            .update(lease_owner=owner, lease_expires_at=self._lease_end(), runnable_since=now)
        )
        if not claimed:
            return False
        run = Run(self, Thread.objects.select_related("agent").get(pk=thread_id), owner)
        try:
            run.drive()
        except LeaseLost:
            log.info("thread %s: lease lost, stopping", thread_id)
        except (OperationalError, InterfaceError):
            raise  # transient: the task retries, and the saved steps are not run again
        except Exception as e:
            # A bug or a broken row would otherwise leave the thread runnable, and the sweeper
            # would enqueue it again forever: fail it, with what went wrong, and keep the trace.
            log.exception("thread %s failed unexpectedly", thread_id)
            run.fail_unexpectedly(e)
        finally:
            if not run.released:
                Thread.objects.filter(pk=thread_id, lease_owner=owner).update(
                    lease_owner="", lease_expires_at=None
                )
        return True

    def _lease_end(self) -> Any:
        return self.clock() + timedelta(seconds=settings.THREAD_LEASE_SECONDS)


def to_runtime(row: StackFrame) -> Frame:
    return Frame(
        agent_name=row.agent_name,
        agent_type=row.agent_type,
        messages=row.messages,
        system_prompt=row.system_prompt,
        model=row.model,
        tools=list(row.tools),
        tool_overrides=dict(row.tool_overrides),
        iteration=row.iteration,
        max_iterations=row.max_iterations,
        parent_tool_use_id=row.parent_tool_use_id or None,
        max_tokens=row.max_tokens,
        key=row.pk,
    )


class Run(Hooks):
    """One worker's hold on one thread: the orchestration loop and its checkpoints."""

    def __init__(self, engine: Engine, thread: Thread, owner: str) -> None:
        self.engine = engine
        self.thread = thread
        self.owner = owner
        self.row: StackFrame | None = None
        self.buffered: list[Event] = []
        self.resumed: list[Any] = []
        self.released = False  # a committed status change gave the lease back

    # The orchestration loop -------------------------------------------------------------

    def drive(self) -> None:
        while True:
            stack = list(self.thread.frames.filter(status=ACTIVE).order_by("depth"))
            if not stack:
                log.warning("thread %s is running with an empty stack", self.thread.pk)
                self._finish(
                    Thread.Status.FAILED,
                    Event.Type.THREAD_FAILED,
                    error="The agent stack was empty.",
                )
                return
            self.row = stack[-1]
            frame = to_runtime(self.row)
            decisions = self._decisions(frame)
            result = execute_turn(
                frame,
                llm=self._provider(frame),
                tools=self.engine.tools,
                hooks=self,
                decisions=decisions,
                run=self.thread.pk,
                agents=self.engine.agents,
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
            return ScriptedProvider(agent.script or [])  # read with the thread: no query
        return self.engine.provider(frame)

    def _handle(self, frame: Frame, result: TurnResult, stack: list[StackFrame]) -> bool:
        """Persist what the turn ended with; True when the loop should go on."""
        row = self.row
        is_main = row.agent_type == StackFrame.Type.MAIN
        if result.action == TurnAction.SUSPENDED:
            self._suspend(frame, result, stack)
            return False
        if result.action == TurnAction.SEND_TEXT:
            if is_main:
                self._finish(
                    Thread.Status.COMPLETED,
                    Event.Type.THREAD_COMPLETED,
                    frame=frame,
                    result=result.text,
                )
            else:
                self._wait_for_input(frame, result.text)
            return False
        if result.action == TurnAction.CHILD_ACTIVATED:
            self._push(frame, result.child_frame, stack)
            return True
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

    def llm_responded(self, frame: Frame, response: Any) -> None:
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
    def tool_scope(self, frame: Frame, tool_use: dict[str, Any]) -> Iterator[None]:
        with transaction.atomic():
            self._renew()
            yield
            self._save(frame)

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

    # Checkpoints ------------------------------------------------------------------------

    def _where(self) -> dict[str, Any]:
        return {"agent": self.row.agent_name, "frame": self.row.label, "depth": self.row.depth}

    def _buffer(self, type: str, payload: dict[str, Any], suspension_id: Any = None) -> None:
        self.buffered.append(
            Event(type=type, thread_id=self.thread.pk, suspension_id=suspension_id, payload=payload)
        )

    def _renew(self) -> None:
        """Extend the lease; fails when the thread was cancelled or taken over."""
        n = Thread.objects.filter(
            pk=self.thread.pk, lease_owner=self.owner, status=Thread.Status.RUNNING
        ).update(lease_expires_at=self.engine._lease_end())
        if not n:
            raise LeaseLost(self.thread.pk)

    def _save(self, frame: Frame, row: StackFrame | None = None) -> None:
        """Write the frame and what happened since the last checkpoint (inside a transaction)."""
        row = row or self.row
        row.messages = frame.messages
        row.iteration = frame.iteration
        row.save(update_fields=["messages", "iteration", "updated_at"])
        if self.resumed:
            Suspension.objects.filter(pk__in=self.resumed, resumed_at__isnull=True).update(
                resumed_at=self.engine.clock()
            )
            self.resumed = []
        events.record_many(self.buffered)
        self.buffered = []

    def _decisions(self, frame: Frame) -> dict[str, Decision]:
        """Decided suspensions of this frame whose tool uses still wait for a result."""
        waiting = {u["id"] for u in msgs.unresolved_tool_uses(frame.messages)}
        if not waiting:
            return {}
        decided = (
            Suspension.objects.filter(frame=self.row, tool_use_id__in=waiting)
            .exclude(status=Suspension.Status.PENDING)
            .select_related("decided_by")
        )
        result = {}
        for s in decided:
            result[s.tool_use_id] = Decision(
                status=s.status,
                approved=bool(s.approved),
                reason=s.reason,
                modified_args=s.modified_args,
                response=s.response,
                decided_by=s.decided_by.username if s.decided_by else None,
            )
            if s.resumed_at is None:
                self.resumed.append(s.pk)
                self._buffer(
                    Event.Type.AGENT_RESUMED,
                    {
                        "tool": s.tool_name,
                        "status": s.status,
                        "approved": s.approved,
                        **self._where(),
                    },
                    suspension_id=s.pk,
                )
        return result

    def _suspend(self, frame: Frame, result: TurnResult, stack: list[StackFrame]) -> None:
        now = self.engine.clock()
        group = uuid.uuid4()
        lineage = " → ".join("main" if f.depth == 0 else f.label for f in stack)
        with transaction.atomic():
            self._renew()
            known = set(
                Suspension.objects.filter(
                    frame=self.row, tool_use_id__in=[c.tool_use_id for c in result.blocking]
                ).values_list("tool_use_id", flat=True)
            )
            for call in result.blocking:
                if call.tool_use_id in known:
                    continue
                timeout = call.tool.timeout or settings.DEFAULT_BLOCKING_TIMEOUT
                s = Suspension.objects.create(
                    thread=self.thread,
                    frame=self.row,
                    group=group,
                    agent_name=self.row.agent_name,
                    lineage=lineage,
                    tool_use_id=call.tool_use_id,
                    tool_name=call.tool.name,
                    tool_input=call.input,
                    tool_schema=call.tool.input_schema,
                    kind=call.tool.kind,
                    prompt=call.preceding_text,
                    timeout=timeout,
                    expires_at=now + timedelta(seconds=timeout),
                    on_timeout=call.tool.on_timeout,
                )
                self._buffer(Event.Type.AGENT_SUSPENDED, suspension_payload(s), suspension_id=s.pk)
            self._save(frame)
            self._set_status(Thread.Status.SUSPENDED)
        self.released = True

    def _wait_for_input(self, frame: Frame, text: str) -> None:
        with transaction.atomic():
            self._renew()
            self._save(frame)
            events.record(
                Event.Type.THREAD_WAITING,
                thread_id=self.thread.pk,
                payload={"text": text, **self._where()},
            )
            self._set_status(Thread.Status.WAITING_INPUT)
        self.released = True

    def fail_unexpectedly(self, error: Exception) -> None:
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
        with transaction.atomic():
            self._renew()
            if frame is not None:
                self._save(frame)
                final = (
                    StackFrame.Status.COMPLETED
                    if status == Thread.Status.COMPLETED
                    else StackFrame.Status.FAILED
                )
                StackFrame.objects.filter(pk=self.row.pk).update(
                    status=final, result=result or error
                )
            if frame is None or self.row.depth > 0:
                # A failure ends the frames below the top too: the thread has no stack left.
                self.thread.frames.filter(status=ACTIVE).update(
                    status=StackFrame.Status.FAILED, updated_at=self.engine.clock()
                )
            self.thread.result = result
            self.thread.error = error
            events.record(
                event_type,
                thread_id=self.thread.pk,
                payload={"status": status, "result": result, "error": error, "stack": []},
            )
            self._set_status(status, extra=["result", "error"])
        self.released = True

    def _set_status(self, status: str, extra: list[str] | None = None) -> None:
        """The last write of a step: the new status, and the lease given back with it."""
        self.thread.status = status
        self.thread.lease_owner = ""
        self.thread.lease_expires_at = None
        self.thread.save(
            update_fields=[
                "status",
                "lease_owner",
                "lease_expires_at",
                "updated_at",
                *(extra or []),
            ]
        )

    def _push(self, frame: Frame, child: Frame, stack: list[StackFrame]) -> None:
        """Save the parent with its pending use_skill/use_agent call and the child, together.

        The tool's own transaction was rolled back by ChildActivated; this one writes the
        parent's messages (the call stays unresolved until the child pops) and the child row,
        so a crash leaves either both or neither.
        """
        with transaction.atomic():
            self._renew()
            self._save(frame)
            row = StackFrame.objects.create(
                thread=self.thread,
                parent=self.row,
                depth=self.row.depth + 1,
                agent_name=child.agent_name,
                agent_type=child.agent_type,
                messages=child.messages,
                system_prompt=child.system_prompt,
                model=child.model,
                max_iterations=child.max_iterations,
                max_tokens=child.max_tokens,
                tools=child.tools,
                tool_overrides=child.tool_overrides,
                parent_tool_use_id=child.parent_tool_use_id or "",
            )
            events.record(
                Event.Type.FRAME_PUSHED,
                thread_id=self.thread.pk,
                payload={
                    "frame": row.label,
                    "agent": row.agent_name,
                    "agent_type": row.agent_type,
                    "depth": row.depth,
                    "parent_tool_use_id": row.parent_tool_use_id,
                    "from": self.row.label,
                    "message": msgs.text_of(child.messages[0]["content"]) if child.messages else "",
                    "stack": breadcrumb([*stack, row]),
                },
            )

    def _pop(self, frame: Frame, stack: list[StackFrame], text: str, is_error: bool) -> bool:
        """The top frame ends; its result (or error) becomes its parent's tool_result.

        Returns whether the loop goes on: not when no frame was left below to take the result.
        """
        child = self.row
        tool_use_id, content, is_error = result_for_parent(frame, text, is_error)
        if len(stack) < 2:
            log.warning("thread %s: %s ended with no frame below it", self.thread.pk, child.label)
            if is_error:
                failed = Thread.Status.FAILED
                self._finish(failed, Event.Type.THREAD_FAILED, frame=frame, error=content)
            else:
                done = Thread.Status.COMPLETED
                self._finish(done, Event.Type.THREAD_COMPLETED, frame=frame, result=content)
            return False
        parent = stack[-2]
        waiting = {u["id"] for u in msgs.unresolved_tool_uses(parent.messages)}
        if tool_use_id not in waiting:
            raise AssertionError(
                f"{child.label} finished, but {parent.label} has no pending tool use {tool_use_id}"
            )
        parent_frame = to_runtime(parent)
        msgs.add_tool_result(parent_frame.messages, tool_use_id, content, is_error)
        with transaction.atomic():
            self._renew()
            self._save(frame)
            StackFrame.objects.filter(pk=child.pk).update(
                status=StackFrame.Status.FAILED if is_error else StackFrame.Status.COMPLETED,
                result=content,
            )
            parent.messages = parent_frame.messages
            parent.save(update_fields=["messages", "updated_at"])
            events.record(
                Event.Type.FRAME_POPPED,
                thread_id=self.thread.pk,
                payload={
                    "frame": child.label,
                    "agent": child.agent_name,
                    "agent_type": child.agent_type,
                    "depth": child.depth,
                    "result": content,
                    "is_error": is_error,
                    "to": parent.label,
                    "parent_tool_use_id": tool_use_id,
                    "stack": breadcrumb(stack[:-1]),
                },
            )
        return True


def breadcrumb(stack: list[StackFrame]) -> list[dict[str, Any]]:
    """The stack as FRAME_PUSHED / FRAME_POPPED carry it, bottom first: a page's breadcrumb
    is rebuilt from the last such event alone."""
    return [
        {
            "id": f.pk,
            "label": f.label,
            "agent": f.agent_name,
            "type": f.agent_type,
            "depth": f.depth,
        }
        for f in stack
    ]


engine = Engine()
