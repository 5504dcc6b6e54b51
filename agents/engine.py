"""The worker's side: take a thread, run its stack until it needs someone, save every step.

`advance(thread_id)` is what the Celery tasks call. It claims the thread with a lease (a
conditional update, so at most one worker runs a thread: invariant 3), then loops over the
stack as the seed's orchestration loop does, without recursion.

The lease is short (THREAD_LEASE_SECONDS) and a heartbeat thread renews it while the worker
runs the thread, so a worker that dies (SIGKILL, a lost database connection) stops renewing
and the sweeper hands the thread to another worker within seconds; a live worker keeps it for
as long as a tool or a model call takes.

A tool runs outside any database transaction, so a slow tool holds no lock that a decision, a
cancel or another thread needs. Before it runs, the assistant message that asked for it is
saved (its tool_use id becomes durable); after it, its result is saved in one transaction with
its events, and a result already saved is never run again. A worker killed while a tool runs
leaves no result: the call runs again from the start, under the same idempotency key
(ToolContext.idempotency_key), which tools with outside effects use to act once.
"""

import contextlib
import functools
import inspect
import logging
import threading
import uuid
from collections.abc import Callable, Iterator
from datetime import timedelta
from typing import Any

from django.conf import settings
from django.db import DatabaseError, InterfaceError, OperationalError, connection, transaction
from django.utils import timezone

from agents import (
    dispatch,
    events,
    policy,
    presentation,
    reminders,
    run_status,
    statements,
    versions,
)
from agents.models import AgentDefinition, Event, StackFrame, Suspension, Thread
from agents.payloads import suspension_payload
from agents.replies import input_rules
from agents.runtime import agent_tools
from agents.runtime import messages as msgs
from agents.runtime.llm import (
    SCRIPTED,
    AnthropicProvider,
    LLMProvider,
    LLMRequest,
    LLMResponse,
    ScriptedProvider,
    StreamListener,
)
from agents.runtime.loop import Decision, Frame, Hooks, TurnAction, TurnResult, execute_turn
from agents.runtime.subagents import (
    AGENT,
    AgentResolver,
    build_frame,
    failure_for_parent,
    result_for_parent,
)
from agents.runtime.tools import Tool, ToolRegistry
from agents.runtime.tools import registry as default_registry
from agents.starting import find_agent
from agents.streaming import LiveWriter
from gateway.compiled import insert

log = logging.getLogger(__name__)

ACTIVE = StackFrame.Status.ACTIVE
# Agents may call each other as tools (a → b → a is a valid set of agent files): an instance
# this deep gets an error result instead of a child of its own.
MAX_DEPTH = 8


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
        claimed = statements.claim_lease(thread_id, owner, self._lease_end(), now)
        if not claimed:
            return False
        heartbeat = Heartbeat(self, thread_id, owner)
        heartbeat.start()
        run = None
        try:
            run = Run(self, statements.thread_with_agent(thread_id), owner)
            self._drive(run, thread_id)
        finally:
            heartbeat.stop()
            if run is None or not run.released:
                self._release(thread_id, owner)
        return True

    def advance_instance(self, frame_id: Any) -> bool:
        """Run an agent instance's lane if it is runnable and free (the same rules as
        `advance`, under the instance's own lease, so instances of one thread run side by
        side on different workers); returns whether this call ran it."""
        owner = uuid.uuid4().hex
        now = self.clock()
        claimed = (
            StackFrame.objects.filter(
                pk=frame_id, instance__gt=0, status=ACTIVE, runnable_since__isnull=False
            )
            .exclude(lease_expires_at__gt=now)
            .update(
                lease_owner=owner,
                lease_expires_at=self._lease_end(),
                runnable_since=now,
                requeues=0,
            )
        )
        if not claimed:
            return False
        heartbeat = Heartbeat(self, frame_id, owner, lane=True)
        heartbeat.start()
        run = None
        try:
            lane = StackFrame.objects.select_related("thread__agent").get(pk=frame_id)
            run = Run(self, lane.thread, owner, lane=lane)
            self._drive(run, lane.thread_id)
        finally:
            heartbeat.stop()
            if run is None or not run.released:
                self._release_lane(frame_id, owner)
        return True

    def _drive(self, run: "Run", thread_id: Any) -> None:
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

    def _release(self, thread_id: Any, owner: str) -> None:
        """Give the lease back so the next task may run the thread at once. On a broken
        connection this fails; the lease then runs out by itself within THREAD_LEASE_SECONDS,
        and the error that broke the step is the one the task sees."""
        try:
            Thread.objects.filter(pk=thread_id, lease_owner=owner).update(
                lease_owner="", lease_expires_at=None
            )
        except DatabaseError:
            log.warning("thread %s: the lease could not be released", thread_id, exc_info=True)

    def _release_lane(self, frame_id: Any, owner: str) -> None:
        try:
            StackFrame.objects.filter(pk=frame_id, lease_owner=owner).update(
                lease_owner="", lease_expires_at=None
            )
        except DatabaseError:
            log.warning("instance %s: the lease could not be released", frame_id, exc_info=True)

    def _lease_end(self) -> Any:
        return self.clock() + timedelta(seconds=settings.THREAD_LEASE_SECONDS)


class Heartbeat(threading.Thread):
    """Renews a held lease every third of THREAD_LEASE_SECONDS while the worker runs the
    thread. It stops renewing when the lease is no longer this worker's (cancelled, taken
    over); the worker learns that at its next checkpoint (Run._renew raises LeaseLost)."""

    def __init__(self, engine: Engine, thread_id: Any, owner: str, lane: bool = False) -> None:
        super().__init__(name=f"lease-{thread_id}", daemon=True)
        self.engine = engine
        self.thread_id = thread_id  # the instance's frame id for a lane
        self.owner = owner
        self.lane = lane
        self.interval = max(settings.THREAD_LEASE_SECONDS / 3, 0.05)
        self.stopped = threading.Event()

    def run(self) -> None:
        renewed = False
        try:
            while not self.stopped.wait(self.interval):
                renewed = True
                try:
                    if self.lane:
                        rows = StackFrame.objects.filter(status=ACTIVE)
                    else:
                        rows = Thread.objects.filter(status=Thread.Status.RUNNING)
                    held = rows.filter(pk=self.thread_id, lease_owner=self.owner).update(
                        lease_expires_at=self.engine._lease_end()
                    )
                except DatabaseError:
                    # The database is away: the next beat tries again; if the lease runs out
                    # meanwhile, the checkpoint after the step notices.
                    log.warning("thread %s: lease renewal failed", self.thread_id, exc_info=True)
                    continue
                if not held:
                    return
        finally:
            if renewed:
                # This thread's own connection (asking for it in a thread that made no query
                # would set one up just to close it, on every step).
                connection.close()

    def stop(self) -> None:
        self.stopped.set()


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

    def __init__(
        self, engine: Engine, thread: Thread, owner: str, lane: StackFrame | None = None
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
        if self.unsaved_answer:
            # The call's tool_use id is its idempotency key: it must be stored before the tool
            # acts, or a crash would make the model ask again under a new id.
            with transaction.atomic():
                self._renew()
                self._save(frame)
        # The live line says which tool runs; a result known without running one (a decision
        # that is the result) would show it for no time at all, at two writes and wake-ups.
        shown = runs and self.live is not None
        if shown:
            self.live.activity(f"calling {tool_use['name']}…")
        yield  # the tool runs here, outside any transaction
        if shown:
            self.live.activity("")
        with transaction.atomic():
            self._renew()  # LeaseLost: cancelled or taken over meanwhile, the result is dropped
            self._save(frame)

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

    # Checkpoints ------------------------------------------------------------------------

    def _where(self) -> dict[str, Any]:
        return {
            "agent": self.row.agent_name,
            "frame": self.row.label,
            "frame_id": self.row.pk,
            "depth": self.row.depth,
            "lane": self.lane.pk if self.lane is not None else None,
            "instance": self.lane.instance_name if self.lane is not None else None,
        }

    def _buffer(self, type: str, payload: dict[str, Any], suspension_id: Any = None) -> None:
        self.buffered.append(
            Event(type=type, thread_id=self.thread.pk, suspension_id=suspension_id, payload=payload)
        )

    def _renew(self) -> None:
        """Extend the lease; fails when the thread was cancelled or taken over."""
        if self.lane is not None:
            # The thread's row first, as cancel_thread and wake_parent take it before frames,
            # and as the events' hash chain (agents.chain) takes it anyway: locking the frame
            # first would deadlock with a cancel.
            Thread.objects.select_for_update(no_key=True).filter(pk=self.thread.pk).values_list(
                "pk", flat=True
            ).first()
            n = StackFrame.objects.filter(
                pk=self.lane.pk, lease_owner=self.owner, status=ACTIVE
            ).update(lease_expires_at=self.engine._lease_end())
        else:
            n = statements.renew_lease(self.thread.pk, self.owner, self.engine._lease_end())
        if not n:
            raise LeaseLost(self.thread.pk)

    def _save(
        self, frame: Frame, row: StackFrame | None = None, extra: tuple[str, ...] = ()
    ) -> None:
        """Write the frame and what happened since the last checkpoint (inside a transaction).
        `extra`: more of the row's fields to write with it (a final status)."""
        row = row or self.row
        row.messages = frame.messages
        row.iteration = frame.iteration
        if extra in ((), ("status", "result")):
            # row.save(update_fields=[...]), through a statement compiled once per process.
            row.updated_at = timezone.now()  # as auto_now sets it
            values = [row.messages, row.iteration, row.input_tokens, row.output_tokens]
            values += [row.tools_used, row.updated_at]
            if extra:
                n = statements.save_ended_frame(row.pk, *values, row.status, row.result)
            else:
                n = statements.save_frame(row.pk, *values)
            if not n:
                raise DatabaseError("Save with update_fields did not affect any rows.")
        else:
            row.save(
                update_fields=[
                    "messages",
                    "iteration",
                    "input_tokens",
                    "output_tokens",
                    "tools_used",
                    "updated_at",
                    *extra,
                ]
            )
        if self.unsaved_answer and self.live is not None:
            transaction.on_commit(self.live.message_saved)
        self.unsaved_answer = False
        if self.resumed:
            resumed = list(dict.fromkeys(self.resumed))
            statements.mark_resumed(resumed, self.engine.clock())
            self.resumed = []
        events.record_many(self.buffered)
        self.buffered = []

    def _decisions(self, frame: Frame) -> dict[str, Decision]:
        """Decided suspensions of this frame whose tool uses still wait for a result."""
        waiting = {u["id"] for u in msgs.unresolved_tool_uses(frame.messages)}
        if not waiting:
            return {}
        decided = statements.decided(self.row.pk, sorted(waiting))
        result = {}
        for s in decided:
            result[s.tool_use_id] = Decision(
                status=s.status,
                approved=bool(s.approved),
                reason=s.reason,
                modified_args=s.modified_args,
                response=s.response,
                decided_by=s.decided_by_name or None,
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

    def _suspend(self, frame: Frame, result: TurnResult, stack: list[StackFrame]) -> bool:
        """Raise the blocking calls as one group of suspensions, each under the policy in
        force (agents.policy), whose rules may decide it at once. Returns True when nothing
        is left pending (every call decided by policy): the loop goes on."""
        now = self.engine.clock()
        group = uuid.uuid4()
        lineage = " → ".join("main" if f.depth == 0 else f.label for f in self._ancestry(stack))
        with transaction.atomic():
            if self.lane is None:
                # Suspended, the lease given back, in the lease's check (the usual outcome,
                # made undone below when the policy decides every call).
                self._end(Thread.Status.SUSPENDED)
            else:
                self._renew()
            uses = list(dict.fromkeys(c.tool_use_id for c in result.blocking))
            known = statements.raised(self.row.pk, uses)
            # Whether any of the calls waits for a person: one raised before (a retried
            # step) and still pending, or one raised now that no rule decided.
            waiting = Suspension.Status.PENDING in known.values()
            agent_row = functools.cache(self._agent_row)
            agent_ladder = functools.cache(lambda: reminders.ladder_of(agent_row()))
            for call in result.blocking:
                if call.tool_use_id in known:
                    continue
                timeout = call.tool.timeout or settings.DEFAULT_BLOCKING_TIMEOUT
                expires_at = now + timedelta(seconds=timeout)
                # The tool's own ladder (its declaration and this agent's tool_overrides),
                # else the agent's: taken whole from one place, so a step number means the
                # reminders it was written beside.
                steps = call.tool.ladder() or agent_ladder()
                in_force = policy.effective((agent_row() and agent_row().policy) or {}, call.tool)
                auto = policy.automatic(in_force, call.input)
                kept = policy.snapshot(in_force, self.thread)
                decided = {}
                if auto is not None:
                    kept["auto"] = auto.payload()
                    decided = {
                        "status": Suspension.Status.APPROVED
                        if auto.approved
                        else Suspension.Status.REJECTED,
                        "approved": auto.approved,
                        "reason": auto.reason,
                        "decided_by_name": "policy",
                        "decided_at": now,
                    }
                s = Suspension(
                    thread=self.thread,
                    frame=self.row,
                    group=group,
                    agent_name=self.row.agent_name,
                    lineage=lineage,
                    tool_use_id=call.tool_use_id,
                    tool_name=call.tool.name,
                    tool_input=call.input,
                    tool_schema=call.tool.input_schema,
                    presentation=presentation.snapshot(call.tool),
                    kind=call.tool.kind,
                    prompt=call.preceding_text,
                    timeout=timeout,
                    expires_at=expires_at,
                    on_timeout=call.tool.on_timeout,
                    **reminders.ladder_fields(steps, expires_at, now),
                    **versions.binding_fields(
                        self.row.agent_name, call.tool, call.input, agent_row()
                    ),
                    policy=kept,
                    **decided,
                )
                insert([s])  # as s.save() would, through a statement written once
                payload = {**suspension_payload(s), **self._where()}
                if auto is not None:
                    # Raised as pending, then decided by its rule with no person as actor.
                    payload = {**payload, "status": Suspension.Status.PENDING, "decision": None}
                self._buffer(Event.Type.AGENT_SUSPENDED, payload, suspension_id=s.pk)
                if auto is not None:
                    decision = {"tool": s.tool_name, "agent": s.agent_name, **s.outcome()}
                    self._buffer(
                        Event.Type.SUSPENSION_DECIDED,
                        {**decision, **auto.payload()},
                        suspension_id=s.pk,
                    )
                else:
                    waiting = True
            self._save(frame)
            if not waiting:
                if self.lane is None:
                    self._hold()
                return True
            if self.lane is not None:
                # Only this instance waits; the thread and its other instances run on, unless
                # none is left working: the run is then suspended.
                self._idle_lane()
                run_status.settle(self.thread.pk, now)
            if self.live is not None:
                # In this transaction: the line says so when the suspension shows.
                self.live.activity("waiting for approval", alone=False)
                self.live = None  # the line stays until the frame works again
        self.released = True
        return False

    def _agent_row(self) -> AgentDefinition | None:
        """The row of the agent whose frame made the calls: its policy, ladder and version
        (no query for the thread's own agent, read with the thread at the step's start)."""
        if self.row.agent_name == self.thread.agent.name:
            return self.thread.agent
        return AgentDefinition.objects.filter(name=self.row.agent_name).first()

    def _close_live(self, alone: bool = True) -> None:
        """The frame stops working: its live view goes with the step's last commit, so no page
        sees a live line after the thread's end (LiveWriter.close is safe in a transaction).
        `alone=False`: no savepoint of its own; a failure fails the step's transaction."""
        if self.live is not None:
            self.live.close(alone=alone)
            self.live = None

    def _ancestry(self, stack: list[StackFrame]) -> list[StackFrame]:
        """The frames from the main one down to the top of this run's stack: an instance's
        lane hangs under the frame that called it."""
        if self.lane is None:
            return stack
        above: list[StackFrame] = []
        parent_id = self.lane.parent_id
        while parent_id is not None:
            parent = StackFrame.objects.only(
                "pk", "parent_id", "depth", "agent_name", "agent_type", "instance"
            ).get(pk=parent_id)
            above.append(parent)
            parent_id = parent.parent_id
        return [*reversed(above), *stack]

    def _idle_lane(self) -> None:
        """The lane stops until a decision or its instances wake it; the lease goes back."""
        StackFrame.objects.filter(pk=self.lane.pk, lease_owner=self.owner).update(
            runnable_since=None, lease_owner="", lease_expires_at=None
        )

    # Agents as tools ----------------------------------------------------------------------

    def _instances(self, frame: Frame) -> dict[str, StackFrame]:
        """This frame's instances for its unresolved calls, by tool_use id."""
        waiting = [
            u["id"]
            for u in msgs.unresolved_tool_uses(frame.messages)
            if agent_tools.agent_of(u.get("name", "")) is not None
        ]
        if not waiting:
            return {}  # no call to an agent as a tool waits: no instance to read
        rows = StackFrame.objects.filter(
            parent=self.row, instance__gt=0, parent_tool_use_id__in=waiting
        )
        return {r.parent_tool_use_id: r for r in rows}

    def _collect(self, frame: Frame) -> frozenset[str]:
        """Add the results of finished instances to the frame; returns the tool_use ids of
        the instances still running. A result is added once: it answers its call."""
        running = set()
        for tool_use_id, row in self._instances(frame).items():
            if row.status == ACTIVE:
                running.add(tool_use_id)
                continue
            is_error = row.status != StackFrame.Status.COMPLETED
            msgs.add_tool_result(frame.messages, tool_use_id, row.result, is_error)
            self.unsaved_answer = True  # saved at the next checkpoint
            self._buffer(
                Event.Type.TOOL_RESULT,
                {
                    "tool": agent_tools.tool_name(row.agent_name),
                    "tool_use_id": tool_use_id,
                    "content": row.result,
                    "is_error": is_error,
                    "from_instance": row.instance_name,
                    **self._where(),
                },
            )
        return frozenset(running)

    def _fan_out(self, frame: Frame) -> None:
        """Start one instance per agent-tool call of the last answer that has none: a frame
        and a task each, with the answer saved in the same transaction."""
        now = self.engine.clock()
        pending = msgs.unresolved_tool_uses(frame.messages)
        calls = [u for u in pending if agent_tools.agent_of(u["name"]) is not None]
        assistant = frame.messages[msgs.last_assistant_index(frame.messages)]["content"]
        batch = [u for u in msgs.tool_uses(assistant) if agent_tools.agent_of(u["name"])]
        index = {u["id"]: n for n, u in enumerate(batch, 1)}
        started: list[Any] = []
        with transaction.atomic():
            self._renew()
            known = set(self._instances(frame))
            for use in calls:
                if use["id"] in known:
                    continue
                name = agent_tools.agent_of(use["name"])
                spec = self.engine.agents(name)
                if spec is not None and self.row.depth >= MAX_DEPTH:
                    content = agent_tools.error_message(
                        f"{use['name']} would run {MAX_DEPTH + 1} agents deep; agents calling "
                        "agents stop there."
                    )
                    msgs.add_tool_result(frame.messages, use["id"], content, True)
                    self.tool_result(frame, use, content, True)
                    continue
                if spec is None:
                    content = agent_tools.unknown_message(use["name"])
                    msgs.add_tool_result(frame.messages, use["id"], content, True)
                    self.tool_result(frame, use, content, True)
                    continue
                child = build_frame(
                    spec,
                    AGENT,
                    agent_tools.input_text(use["input"]),
                    self.engine.agents,
                    parent_tool_use_id=use["id"],
                )
                row = StackFrame.objects.create(
                    thread=self.thread,
                    parent=self.row,
                    depth=self.row.depth + 1,
                    instance=index[use["id"]],
                    agent_name=child.agent_name,
                    agent_type=child.agent_type,
                    messages=child.messages,
                    system_prompt=child.system_prompt,
                    model=child.model,
                    max_iterations=child.max_iterations,
                    max_tokens=child.max_tokens,
                    tools=child.tools,
                    tool_overrides=child.tool_overrides,
                    parent_tool_use_id=use["id"],
                    runnable_since=now,
                )
                row.lane = row
                row.save(update_fields=["lane"])
                started.append(row.pk)
                self._buffer(
                    Event.Type.INSTANCE_STARTED,
                    {
                        "instance": row.instance_name,
                        "frame_id": row.pk,
                        "agent": row.agent_name,
                        "index": row.instance,
                        "parent_frame_id": self.row.pk,
                        "parent_frame": self.row.label,
                        "tool_use_id": use["id"],
                        "message": msgs.text_of(child.messages[0]["content"]),
                        "started_at": row.created_at.isoformat(),
                        "lane": self.lane.pk if self.lane is not None else None,
                    },
                )
            self._save(frame)
            for pk in started:
                dispatch.enqueue_instance(pk)

    def _wait_for_instances(self, frame: Frame) -> bool:
        """The frame's only calls left are running instances: it stops until the last one
        finishes (that one wakes it, agents.engine.Run._wake_parent). Decided under the
        thread's lock, which a finishing instance takes too, so the wake-up is never lost.
        Returns True when they have all finished meanwhile: the loop goes on at once."""
        with transaction.atomic():
            Thread.objects.select_for_update().filter(pk=self.thread.pk).first()
            self._renew()
            self._save(frame)
            if not StackFrame.objects.filter(
                parent=self.row, instance__gt=0, status=ACTIVE
            ).exists():
                return True
            if self.lane is None:
                Thread.objects.filter(pk=self.thread.pk, lease_owner=self.owner).update(
                    runnable_since=None, lease_owner="", lease_expires_at=None
                )
            else:
                self._idle_lane()
            # Every instance may be waiting for a person already.
            run_status.settle(self.thread.pk, self.engine.clock())
        self.released = True
        return False

    def _fail_instance(self, error: Exception) -> None:
        """Something unexpected broke inside an instance: that call gets an error result
        (the seed's "Error: {e}") and its siblings and caller go on."""
        now = self.engine.clock()
        text = agent_tools.error_message(error)
        with transaction.atomic():
            Thread.objects.select_for_update().filter(pk=self.thread.pk).first()
            lane = StackFrame.objects.filter(pk=self.lane.pk, status=ACTIVE).first()
            if lane is None:
                return
            StackFrame.objects.filter(lane=lane, status=ACTIVE).exclude(pk=lane.pk).update(
                status=StackFrame.Status.FAILED, finished_at=now
            )
            self._end_instance(lane, lane, now, text, is_error=True)
        self.released = True

    def _end_instance(
        self, lane: StackFrame, top: StackFrame, now: Any, text: str, is_error: bool
    ) -> None:
        """The instance's row, its INSTANCE_FINISHED event, and its caller woken if it was
        the last of its batch (inside the caller's transaction, the thread's lock held)."""
        StackFrame.objects.filter(pk=lane.pk).update(
            status=StackFrame.Status.FAILED if is_error else StackFrame.Status.COMPLETED,
            result=text,
            finished_at=now,
            runnable_since=None,
            lease_owner="",
            lease_expires_at=None,
        )
        events.record(
            Event.Type.INSTANCE_FINISHED,
            thread_id=self.thread.pk,
            payload={
                "instance": lane.instance_name,
                "frame_id": lane.pk,
                "agent": lane.agent_name,
                "index": lane.instance,
                "status": "failed" if is_error else "done",
                "started_at": lane.created_at.isoformat(),
                "finished_at": now.isoformat(),
                "duration_ms": int((now - lane.created_at).total_seconds() * 1000),
                "tools": list(top.tools_used),
                "usage": {"input_tokens": top.input_tokens, "output_tokens": top.output_tokens},
                "result": text,
                "is_error": is_error,
                "lane": lane.pk,
            },
        )
        wake_parent(lane, now)
        # The instance that ended may have been the last one working while the others wait.
        run_status.settle(self.thread.pk, now)

    def _finish_instance(self, frame: Frame, text: str, is_error: bool) -> None:
        """The instance answered (or failed): its result waits on its frame for the caller,
        which it wakes if it was the last of the batch."""
        now = self.engine.clock()
        with transaction.atomic():
            Thread.objects.select_for_update().filter(pk=self.thread.pk).first()
            self._renew()
            self._save(frame)
            self._close_live()
            self._end_instance(self.lane, self.row, now, text, is_error)
        self.released = True

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
                self._save(frame, extra=("status", "result"))
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

    def _end(self, status: str) -> None:
        """The thread's new status (with its result and error), the lease given back, if the
        lease is still this run's; else LeaseLost (the transaction rolls back). One statement
        where _renew and _set_status are two; the thread's row is locked first, as
        cancel_thread and the events' chain take it."""
        now = self.engine.clock()
        n = statements.end_step(
            self.thread.pk, self.owner, status, self.thread.result, self.thread.error, now
        )
        if not n:
            raise LeaseLost(self.thread.pk)
        self.thread.status = status
        self.thread.lease_owner = ""
        self.thread.lease_expires_at = None
        self.thread.updated_at = now

    def _hold(self) -> None:
        """Undo _end in the same transaction: the thread runs on under this run's lease."""
        expires = self.engine._lease_end()
        Thread.objects.filter(pk=self.thread.pk).update(
            status=Thread.Status.RUNNING, lease_owner=self.owner, lease_expires_at=expires
        )
        self.thread.status = Thread.Status.RUNNING
        self.thread.lease_owner = self.owner
        self.thread.lease_expires_at = expires

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

        ChildActivated left the tool's scope without a result; this transaction writes the
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
                lane=self.lane,
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
                    "lane": self.lane.pk if self.lane is not None else None,
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
                    "lane": self.lane.pk if self.lane is not None else None,
                },
            )
        return True


def wake_parent(instance: StackFrame, now: Any) -> None:
    """The caller of a finished (or cancelled) instance runs again once its batch is done,
    unless it waits for a decision too: the decision then resumes it. The caller holds the
    thread's lock, as a frame deciding to wait does."""
    parent = StackFrame.objects.get(pk=instance.parent_id)
    if StackFrame.objects.filter(parent=parent, instance__gt=0, status=ACTIVE).exists():
        return
    if parent.status != ACTIVE:
        return
    if parent.lane_id is None:
        n = (
            Thread.objects.filter(
                pk=instance.thread_id, status=Thread.Status.RUNNING, runnable_since__isnull=True
            )
            .exclude(lease_expires_at__gt=now)
            .update(runnable_since=now, updated_at=now)
        )
        if n:
            dispatch.enqueue_thread(instance.thread_id)
        return
    if Suspension.objects.filter(
        frame__lane_id=parent.lane_id, status=Suspension.Status.PENDING
    ).exists():
        return
    n = StackFrame.objects.filter(
        pk=parent.lane_id, status=ACTIVE, runnable_since__isnull=True
    ).update(runnable_since=now)
    if n:
        dispatch.enqueue_instance(parent.lane_id)


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
