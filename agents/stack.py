"""The stack of frames: a child pushed, a finished top popped into its parent's result."""

import logging
from typing import Any

from django.db import transaction

from agents import events
from agents.models import Event, StackFrame, Thread
from agents.runtime import messages as msgs
from agents.runtime.subagents import result_for_parent
from agents.runtime.turn import Frame

log = logging.getLogger(__name__)


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


class StackSteps:
    """The part of agents.runs.Run that pushes and pops frames."""

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
