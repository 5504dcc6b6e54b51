"""The stack of frames: a child pushed, a finished top popped into its parent's result."""

from typing import Any

from django.db import transaction

from agents import events, statements
from agents.checkpoints import Checkpoint
from agents.leases import Lease
from agents.models import Event, StackFrame
from agents.runtime import messages as msgs
from agents.runtime.turn import Frame
from agents.step import Step


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


class Stack:
    """The run's stack of frames in the database: read at each turn, a child pushed, a
    finished top popped into its parent's result (each with the step's checkpoint)."""

    def __init__(self, lease: Lease, checkpoint: Checkpoint) -> None:
        self.lease = lease
        self.checkpoint = checkpoint

    def load(self, step: Step) -> list[StackFrame]:
        """The active frames of the run's stack (the lane's, or the main one), bottom first."""
        frames = statements.active_stack(step.thread.pk, step.lane_id)
        for frame in frames:
            frame.thread = step.thread  # as the related manager's rows have it
        return frames

    def push(self, step: Step, frame: Frame, child: Frame, stack: list[StackFrame]) -> None:
        """Save the parent with its pending use_skill/use_agent call and the child, together.

        ChildActivated left the tool's scope without a result; this transaction writes the
        parent's messages (the call stays unresolved until the child pops) and the child row,
        so a crash leaves either both or neither.
        """
        with transaction.atomic():
            self.lease.renew(step)
            self.checkpoint.save(step, frame)
            row = StackFrame.objects.create(
                thread=step.thread,
                parent=step.row,
                depth=step.row.depth + 1,
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
                lane=step.lane,
            )
            events.record(
                Event.Type.FRAME_PUSHED,
                thread_id=step.thread.pk,
                payload={
                    "frame": row.label,
                    "agent": row.agent_name,
                    "agent_type": row.agent_type,
                    "depth": row.depth,
                    "parent_tool_use_id": row.parent_tool_use_id,
                    "from": step.row.label,
                    "message": msgs.text_of(child.messages[0]["content"]) if child.messages else "",
                    "stack": breadcrumb([*stack, row]),
                    "lane": step.lane_id,
                },
            )

    def pop(
        self,
        step: Step,
        frame: Frame,
        stack: list[StackFrame],
        returned: tuple[str, str, bool],
    ) -> None:
        """The top frame ends; its result (or error) becomes the tool_result of the frame
        below it (the caller made sure there is one). `returned`: (tool_use_id, content,
        is_error), as agents.runtime.subagents.result_for_parent gives it."""
        tool_use_id, content, is_error = returned
        child = step.row
        parent = stack[-2]
        waiting = {u["id"] for u in msgs.unresolved_tool_uses(parent.messages)}
        if tool_use_id not in waiting:
            raise AssertionError(
                f"{child.label} finished, but {parent.label} has no pending tool use {tool_use_id}"
            )
        parent_frame = to_runtime(parent)
        msgs.add_tool_result(parent_frame.messages, tool_use_id, content, is_error)
        with transaction.atomic():
            self.lease.renew(step)
            self.checkpoint.save(step, frame)
            StackFrame.objects.filter(pk=child.pk).update(
                status=StackFrame.Status.FAILED if is_error else StackFrame.Status.COMPLETED,
                result=content,
            )
            parent.messages = parent_frame.messages
            parent.save(update_fields=["messages", "updated_at"])
            events.record(
                Event.Type.FRAME_POPPED,
                thread_id=step.thread.pk,
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
                    "lane": step.lane_id,
                },
            )


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
