"""Replies to an agent that waits for input: its input rules, a reply, a wait run out."""

import json
from dataclasses import dataclass
from datetime import datetime
from typing import Any
from uuid import UUID

from django.conf import settings
from django.db import transaction
from django.utils import timezone

from agents import dispatch, events, locks
from agents.cancelling import cancel_thread
from agents.models import AgentDefinition, Event, StackFrame, Thread
from agents.runtime import messages as msgs
from infra import strict_json


class NotWaiting(Exception):
    """The thread is not waiting for a message."""


class BadInput(ValueError):
    """A reply the waiting agent does not accept (its input rules); nothing was changed.
    `field` names what is wrong: "type", "text" (too long) or "data"."""

    def __init__(self, message: str, field: str) -> None:
        super().__init__(message)
        self.field = field


TEXT, JSON = "text/plain", "application/json"
INPUT_TYPES = (TEXT, JSON)


@dataclass(frozen=True)
class InputRules:
    max_chars: int
    types: tuple[str, ...]
    timeout: int  # seconds; 0: no timeout
    on_timeout: str  # cancel | continue


def input_rules(agent: AgentDefinition | None) -> InputRules:
    """The agent's input rules, the settings filling what it leaves out."""
    return InputRules(
        max_chars=(agent.input_max_chars if agent and agent.input_max_chars else None)
        or settings.INPUT_MAX_CHARS,
        types=tuple(
            (agent.input_types if agent and agent.input_types else None) or settings.INPUT_TYPES
        ),
        timeout=agent.input_timeout
        if agent and agent.input_timeout is not None
        else settings.INPUT_TIMEOUT_SECONDS,
        on_timeout=agent.on_input_timeout if agent else "cancel",
    )


def _asking_frame(thread: Thread) -> StackFrame | None:
    """The frame the user talks to: the top of the main stack."""
    return (
        thread.frames.filter(status=StackFrame.Status.ACTIVE, lane__isnull=True)
        .order_by("-depth")
        .first()
    )


def provide_input(
    thread_id: UUID,
    user: Any,
    *,
    text: str | None = None,
    data: Any = None,
    content_type: str = TEXT,
) -> Thread:
    """A person's reply to an agent that waits for input: checked against the asking agent's
    input rules (type, length; JSON must be an object), added to the top of the stack, and
    the thread runs again. `text` for text/plain, `data` (or `text` holding JSON) for
    application/json. Raises NotWaiting or BadInput, changing nothing."""
    with transaction.atomic():
        thread = locks.thread(pk=thread_id)
        if thread is None:
            raise Thread.DoesNotExist(thread_id)
        if thread.status != Thread.Status.WAITING_INPUT:
            raise NotWaiting(thread.status)
        top = _asking_frame(thread)
        if top is None:
            raise NotWaiting(thread.status)
        rules = input_rules(AgentDefinition.objects.filter(name=top.agent_name).first())
        if content_type not in INPUT_TYPES:
            raise BadInput(
                f"Unknown input type {content_type!r}: one of {', '.join(INPUT_TYPES)}.", "type"
            )
        if content_type not in rules.types:
            raise BadInput(
                f"'{top.agent_name}' does not accept {content_type} input; it accepts "
                f"{', '.join(rules.types)}.",
                "type",
            )
        if content_type == JSON:
            if data is None:
                try:
                    data = strict_json.loads(text or "")
                except ValueError as e:
                    raise BadInput(f"The input is not valid JSON: {e}.", "data") from e
            if not isinstance(data, dict):
                raise BadInput("JSON input must be an object.", "data")
            text = json.dumps(data, ensure_ascii=False)
        if not isinstance(text, str) or not text.strip():
            raise BadInput("The input is empty.", "text")
        if len(text) > rules.max_chars:
            raise BadInput(
                f"The input is {len(text)} characters long; '{top.agent_name}' accepts at most "
                f"{rules.max_chars}.",
                "text",
            )
        msgs.add_user_text(top.messages, text)
        top.iteration = 0  # the iteration limit counts model calls since the user last spoke
        top.save(update_fields=["messages", "iteration", "updated_at"])
        thread.status = Thread.Status.RUNNING
        thread.runnable_since = timezone.now()
        thread.input_prompt = ""
        thread.input_expires_at = None
        thread.save(
            update_fields=[
                "status",
                "runnable_since",
                "input_prompt",
                "input_expires_at",
                "updated_at",
            ]
        )
        where = {"frame": top.label, "depth": top.depth}
        events.record(
            Event.Type.USER_MESSAGE,
            thread_id=thread.id,
            actor=user,
            payload={"text": text, **where},
        )
        events.record(
            Event.Type.INPUT_PROVIDED,
            thread_id=thread.id,
            actor=user,
            payload={"type": content_type, "length": len(text), "resumed": True, **where},
        )
        dispatch.enqueue_thread(thread.id)
    return thread


def post_message(thread_id: UUID, text: str, user: Any) -> Thread:
    """A user's text message goes to the top of the stack and the thread runs again."""
    return provide_input(thread_id, user, text=text, content_type=TEXT)


def expire_inputs(
    now: datetime | None = None, limit: int = 200, only: UUID | str | None = None
) -> int:
    """Threads whose wait for input ran out (or the one named by `only`, if its wait has):
    cancelled, or, when the asking agent says so, told that the user did not answer and run
    again. Returns how many."""
    now = now or timezone.now()
    rows = Thread.objects.filter(status=Thread.Status.WAITING_INPUT, input_expires_at__lte=now)
    if only is not None:
        rows = rows.filter(pk=only)
    due = list(rows.order_by("input_expires_at").values_list("pk", flat=True)[:limit])
    done = 0
    for pk in due:
        # A run told that nobody answered goes behind the ones people wait on (dispatch).
        with transaction.atomic(), dispatch.unattended():
            thread = locks.thread(pk=pk)
            if thread is None:
                continue
            if thread.status != Thread.Status.WAITING_INPUT or not thread.input_expires_at:
                continue
            if thread.input_expires_at > now:
                continue
            top = _asking_frame(thread)
            agent = AgentDefinition.objects.filter(name=top.agent_name).first() if top else None
            rules = input_rules(agent)
            payload = {
                "on_timeout": rules.on_timeout,
                "timeout": rules.timeout,
                "expires_at": thread.input_expires_at.isoformat(),
                "prompt": thread.input_prompt,
            }
            if rules.on_timeout == "continue" and top is not None:
                note = f"The user did not answer within {rules.timeout} seconds."
                msgs.add_user_text(top.messages, note)
                top.iteration = 0
                top.save(update_fields=["messages", "iteration", "updated_at"])
                thread.status = Thread.Status.RUNNING
                thread.runnable_since = now
                thread.input_expires_at = None
                thread.input_prompt = ""
                thread.save(
                    update_fields=[
                        "status",
                        "runnable_since",
                        "input_expires_at",
                        "input_prompt",
                        "updated_at",
                    ]
                )
                events.record(
                    Event.Type.INPUT_TIMEOUT, thread_id=thread.id, payload={**payload, "told": note}
                )
                dispatch.enqueue_thread(thread.id)
            else:
                events.record(Event.Type.INPUT_TIMEOUT, thread_id=thread.id, payload=payload)
                cancel_thread(
                    thread.id, None, now=now, reason="no answer came before the input timeout"
                )
            done += 1
    return done
