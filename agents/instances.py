"""Agents as tools: instances fanned out on lanes of their own, waited for and collected."""

from typing import Any

from django.db import transaction

from agents import dispatch, events, run_status, statements
from agents.checkpoints import Checkpoint
from agents.leases import Lease
from agents.models import Event, StackFrame, Suspension, Thread
from agents.runtime import agent_tools
from agents.runtime import messages as msgs
from agents.runtime.subagents import AGENT, AgentResolver, build_frame
from agents.runtime.turn import Frame
from agents.step import Step

ACTIVE = StackFrame.Status.ACTIVE
# Agents may call each other as tools (a → b → a is a valid set of agent files): an instance
# this deep gets an error result instead of a child of its own.
MAX_DEPTH = 8


class Instances:
    """Agents called as tools: the instances a frame starts, waits for and collects, and an
    instance's own end (the run that drives its lane)."""

    def __init__(self, lease: Lease, checkpoint: Checkpoint, agents: AgentResolver) -> None:
        self.lease = lease
        self.checkpoint = checkpoint
        self.agents = agents

    def _instances(self, step: Step, frame: Frame) -> dict[str, StackFrame]:
        """This frame's instances for its unresolved calls, by tool_use id."""
        waiting = [
            u["id"]
            for u in msgs.unresolved_tool_uses(frame.messages)
            if agent_tools.agent_of(u.get("name", "")) is not None
        ]
        if not waiting:
            return {}  # no call to an agent as a tool waits: no instance to read
        rows = StackFrame.objects.filter(
            parent=step.row, instance__gt=0, parent_tool_use_id__in=waiting
        )
        return {r.parent_tool_use_id: r for r in rows}

    def collect(self, step: Step, frame: Frame) -> frozenset[str]:
        """Add the results of finished instances to the frame; returns the tool_use ids of
        the instances still running. A result is added once: it answers its call."""
        running = set()
        for tool_use_id, row in self._instances(step, frame).items():
            if row.status == ACTIVE:
                running.add(tool_use_id)
                continue
            is_error = row.status != StackFrame.Status.COMPLETED
            msgs.add_tool_result(frame.messages, tool_use_id, row.result, is_error)
            self.checkpoint.unsaved_answer = True  # saved at the next checkpoint
            self.checkpoint.buffer(
                step,
                Event.Type.TOOL_RESULT,
                {
                    "tool": agent_tools.tool_name(row.agent_name),
                    "tool_use_id": tool_use_id,
                    "content": row.result,
                    "is_error": is_error,
                    "from_instance": row.instance_name,
                    **step.where(),
                },
            )
        return frozenset(running)

    def fan_out(self, step: Step, frame: Frame) -> None:
        """Start one instance per agent-tool call of the last answer that has none: a frame
        and a task each, with the answer saved in the same transaction."""
        now = self.lease.clock()
        pending = msgs.unresolved_tool_uses(frame.messages)
        calls = [u for u in pending if agent_tools.agent_of(u["name"]) is not None]
        last = msgs.last_assistant_index(frame.messages)
        assert last is not None  # the answer that asked for the instances
        assistant = frame.messages[last]["content"]
        batch = [u for u in msgs.tool_uses(assistant) if agent_tools.agent_of(u["name"])]
        index = {u["id"]: n for n, u in enumerate(batch, 1)}
        started: list[Any] = []
        with transaction.atomic():
            self.lease.renew(step)
            known = set(self._instances(step, frame))
            for use in calls:
                if use["id"] in known:
                    continue
                name = agent_tools.agent_of(use["name"])
                assert name is not None  # `calls` are the agent-tool calls
                spec = self.agents(name)
                if spec is not None and step.row.depth >= MAX_DEPTH:
                    content = agent_tools.error_message(
                        f"{use['name']} would run {MAX_DEPTH + 1} agents deep; agents calling "
                        "agents stop there."
                    )
                    msgs.add_tool_result(frame.messages, use["id"], content, True)
                    self.checkpoint.tool_result(step, use, content, True)
                    continue
                if spec is None:
                    content = agent_tools.unknown_message(use["name"])
                    msgs.add_tool_result(frame.messages, use["id"], content, True)
                    self.checkpoint.tool_result(step, use, content, True)
                    continue
                child = build_frame(
                    spec,
                    AGENT,
                    agent_tools.input_text(use["input"]),
                    self.agents,
                    parent_tool_use_id=use["id"],
                )
                row = StackFrame.objects.create(
                    thread=step.thread,
                    parent=step.row,
                    depth=step.row.depth + 1,
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
                self.checkpoint.buffer(
                    step,
                    Event.Type.INSTANCE_STARTED,
                    {
                        "instance": row.instance_name,
                        "frame_id": row.pk,
                        "agent": row.agent_name,
                        "index": row.instance,
                        "parent_frame_id": step.row.pk,
                        "parent_frame": step.row.label,
                        "tool_use_id": use["id"],
                        "message": msgs.text_of(child.messages[0]["content"]),
                        "started_at": row.created_at.isoformat(),
                        "lane": step.lane_id,
                    },
                )
            self.checkpoint.save(step, frame)
            for pk in started:
                dispatch.enqueue_instance(pk)

    def wait(self, step: Step, frame: Frame) -> bool:
        """The frame's only calls left are running instances: it stops until the last one
        finishes (that one wakes it, wake_parent). Decided under the
        thread's lock, which a finishing instance takes too, so the wake-up is never lost.
        Returns True when they have all finished meanwhile: the loop goes on at once."""
        with transaction.atomic():
            statements.lock_thread(step.thread.pk)
            self.lease.renew(step)
            self.checkpoint.save(step, frame)
            if not StackFrame.objects.filter(
                parent=step.row, instance__gt=0, status=ACTIVE
            ).exists():
                return True
            if step.lane is None:
                Thread.objects.filter(pk=step.thread.pk, lease_owner=self.lease.owner).update(
                    runnable_since=None, lease_owner="", lease_expires_at=None
                )
            else:
                self.lease.idle_lane(step)
            # Every instance may be waiting for a person already.
            run_status.settle(step.thread.pk, self.lease.clock())
        self.lease.released = True
        return False

    def fail(self, step: Step, error: Exception) -> None:
        """Something unexpected broke inside an instance: that call gets an error result
        ("Error: {e}", as a tool's failure is) and its siblings and caller go on."""
        now = self.lease.clock()
        text = agent_tools.error_message(error)
        with transaction.atomic():
            statements.lock_thread(step.thread.pk)
            assert step.lane is not None
            lane = StackFrame.objects.filter(pk=step.lane.pk, status=ACTIVE).first()
            if lane is None:
                return
            StackFrame.objects.filter(lane=lane, status=ACTIVE).exclude(pk=lane.pk).update(
                status=StackFrame.Status.FAILED, finished_at=now
            )
            _end_instance(step, lane, lane, now, text, is_error=True)
        self.lease.released = True

    def finish(self, step: Step, frame: Frame, text: str, is_error: bool) -> None:
        """The instance answered (or failed): its result waits on its frame for the caller,
        which it wakes if it was the last of the batch."""
        assert step.lane is not None
        now = self.lease.clock()
        with transaction.atomic():
            statements.lock_thread(step.thread.pk)
            self.lease.renew(step)
            self.checkpoint.save(step, frame)
            step.close_live()
            _end_instance(step, step.lane, step.row, now, text, is_error)
        self.lease.released = True


def _end_instance(
    step: Step, lane: StackFrame, top: StackFrame, now: Any, text: str, is_error: bool
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
        thread_id=step.thread.pk,
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
    run_status.settle(step.thread.pk, now)


def wake_parent(instance: StackFrame, now: Any) -> None:
    """The caller of a finished (or cancelled) instance runs again once its batch is done,
    unless it waits for a decision too: the decision then resumes it. The caller holds the
    thread's lock, as a frame deciding to wait does."""
    assert instance.parent_id is not None  # an instance has its caller
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
