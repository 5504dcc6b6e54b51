"""The state changes people and the clock make: start, message, decide, cancel, expire.

Each is one transaction that writes its events; enqueues happen after commit (invariant 1).
Decisions are conditional updates, so of approve, reject, timeout and cancel exactly one wins
(invariant 2). Every change that touches a thread's suspensions locks the thread row first, so
two decisions of one group cannot both miss that the group is complete.
"""

import functools
import json
import logging
import time
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from django.conf import settings
from django.db import transaction
from django.db.models import Exists, F, Q
from django.utils import timezone

from agents import chain, events, policy, presentation, run_status, statements
from agents.hashing import canonical_hash
from agents.models import AgentDefinition, Event, StackFrame, Suspension, Thread, Vote
from agents.runtime import subagents
from agents.runtime.subagents import AgentSpec
from gateway.compiled import insert

S = Suspension.Status


def _iso(value: datetime | None) -> str | None:
    return value.isoformat() if value else None


def ladder_payload(s: Suspension) -> dict[str, Any]:
    """A suspension's reminders and escalation as the card shows them: when the next
    reminder goes (none once ignored), who it escalates to and when (or when it was)."""
    expires = s.expires_at
    left = s.reminders[s.reminders_sent :] if expires and s.ignored_at is None else []
    escalate_at = None
    if expires and s.escalate_before is not None:
        escalate_at = expires - timedelta(seconds=s.escalate_before)
    return {
        "reminders": list(s.reminders),
        "reminders_sent": s.reminders_sent,
        "next_reminder_at": _iso(expires - timedelta(seconds=left[0])) if left else None,
        "escalate_to": s.escalate_to or None,
        "escalate_at": _iso(escalate_at),
        "escalated_at": _iso(s.escalated_at),
    }


def extension_payload(s: Suspension) -> dict[str, Any] | None:
    """Who moved the deadline, by how much and why; None while it has not been moved."""
    if s.extended_at is None:
        return None
    return {
        "by": s.extended_by_name or None,
        "at": s.extended_at.isoformat(),
        "seconds": s.extension_seconds,
        "reason": s.extension_reason,
    }


def suspension_payload(s: Suspension) -> dict[str, Any]:
    """How a suspension is shown in events and the API."""
    return {
        "id": str(s.id),
        "thread": str(s.thread_id),
        "group": str(s.group),
        "agent": s.agent_name,
        "lineage": s.lineage,
        "tool": s.tool_name,
        "tool_use_id": s.tool_use_id,
        "input": s.tool_input,
        "schema": s.tool_schema,
        "kind": s.kind,
        "prompt": s.prompt,
        "status": s.status,
        "timeout": s.timeout,
        "on_timeout": s.on_timeout,
        "expires_at": s.expires_at.isoformat() if s.expires_at else None,
        "created_at": s.created_at.isoformat() if s.created_at else None,
        "decision": s.outcome() if s.status != S.PENDING else None,
        "resumed_at": s.resumed_at.isoformat() if s.resumed_at else None,
        "ladder": ladder_payload(s),
        "extension": extension_payload(s),
        # What a decision binds to (agents.versions): the pages send them back as `seen`.
        "args_hash": s.args_hash or None,
        "agent_version": s.agent_version,
        # Who may decide and how far a quorum has come (agents.policy).
        "policy": policy.payload(s),
        # What the card says about the call (agents.presentation).
        "presentation": presentation.payload(s),
        # Dismissed from the inbox without a decision (ignore): by whom and when.
        "ignored": {"by": s.ignored_by_name or None, "at": s.ignored_at.isoformat()}
        if s.ignored_at
        else None,
    }


log = logging.getLogger(__name__)


def _enqueue(thread_id: Any, task_name: str = "resume_thread") -> None:
    """Send the thread to a worker once the caller's transaction commits."""
    from agents import tasks

    transaction.on_commit(functools.partial(send, getattr(tasks, task_name), str(thread_id)))


def enqueue_instance(frame_id: Any) -> None:
    """Send an agent instance's lane to a worker once the caller's transaction commits."""
    from agents import tasks

    transaction.on_commit(functools.partial(send, tasks.run_instance, str(frame_id)))


def send(task: Any, *args: Any) -> None:
    """Enqueue a task whose work is already stored. The broker being away must not turn a
    committed change into an error answer: the row says the thread is runnable, and the
    sweeper enqueues it again (requeue_stalled) once the broker is back."""
    try:
        # No queue declared at each send (Celery's default): a task goes to its queue by name
        # (the default exchange), which needs no binding, and kombu's check of its cache of
        # declared queues copied the queue each time, a fifth of daphne's publish
        # (bench/README.md). The workers declare their queues as they start.
        task.apply_async(args, declare=[])
    except Exception:
        log.warning(
            "could not enqueue %s%s; the sweeper will enqueue it again",
            task.name,
            args,
            exc_info=True,
        )


def find_agent(name: str) -> AgentSpec | None:
    """The runtime's view of a stored agent (the engine's `AgentResolver`)."""
    agent = AgentDefinition.objects.filter(name=name).first()
    return agent.as_spec() if agent is not None else None


def start_thread(agent: AgentDefinition, message: str, user: Any) -> Thread:
    main = subagents.build_frame(agent.as_spec(), StackFrame.Type.MAIN, message, find_agent)
    # No savepoint inside a caller's transaction (the pending cap's, approvals.admission):
    # every caller lets a failure end that transaction too, so one would only cost two
    # statements.
    with transaction.atomic(savepoint=False):
        # Inserted through gateway.compiled.insert, as Model.save would (a statement each,
        # written once per process).
        thread = Thread(
            agent=agent,
            created_by=user,
            created_by_name=getattr(user, "username", ""),
            title=message[:200],
            status=Thread.Status.RUNNING,
            runnable_since=timezone.now(),
        )
        insert([thread])
        chain.begun(thread.id)
        frame = StackFrame(
            thread=thread,
            depth=0,
            agent_name=main.agent_name,
            agent_type=StackFrame.Type.MAIN,
            messages=main.messages,
            system_prompt=main.system_prompt,
            model=main.model,
            max_iterations=main.max_iterations,
            max_tokens=main.max_tokens,
            tools=main.tools,
            tool_overrides=main.tool_overrides,
        )
        insert([frame])
        event = events.record(
            Event.Type.THREAD_STARTED,
            thread_id=thread.id,
            actor=user,
            payload={"agent": agent.name, "message": message, "status": thread.status},
        )
        _enqueue(thread.id, "start_thread")
    # What the start wrote, for an answer that need not read it back (approvals.api).
    thread.started = (frame, event)
    return thread


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
    thread_id: Any,
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
    from agents.runtime import messages as msgs

    with transaction.atomic():
        thread = Thread.objects.select_for_update().get(pk=thread_id)
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
                    data = json.loads(text or "")
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
        _enqueue(thread.id)
    return thread


def post_message(thread_id: Any, text: str, user: Any) -> Thread:
    """A user's text message goes to the top of the stack and the thread runs again."""
    return provide_input(thread_id, user, text=text, content_type=TEXT)


def expire_inputs(now: datetime | None = None, limit: int = 200) -> int:
    """Threads whose wait for input ran out: cancelled, or, when the asking agent says so,
    told that the user did not answer and run again. Returns how many."""
    from agents.runtime import messages as msgs

    now = now or timezone.now()
    due = list(
        Thread.objects.filter(status=Thread.Status.WAITING_INPUT, input_expires_at__lte=now)
        .order_by("input_expires_at")
        .values_list("pk", flat=True)[:limit]
    )
    done = 0
    for pk in due:
        with transaction.atomic():
            thread = Thread.objects.select_for_update().get(pk=pk)
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
                _enqueue(thread.id)
            else:
                events.record(Event.Type.INPUT_TIMEOUT, thread_id=thread.id, payload=payload)
                cancel_thread(
                    thread.id, None, now=now, reason="no answer came before the input timeout"
                )
            done += 1
    return done


@dataclass
class Decided:
    suspension: Suspension
    created: bool  # this call took the decision, or cast its vote (False: it was already taken)
    # A quorum's vote that did not decide yet: who approved so far and how many are needed.
    votes: dict[str, Any] | None = None


Refused = policy.Refused


def same_decision(s: Suspension, decision: dict[str, Any]) -> bool:
    """Is `decision` what was recorded? Repeating it is harmless; anything else conflicts."""
    if decision.get("ignore") or s.status not in (S.APPROVED, S.REJECTED, S.RESPONDED):
        return False
    if "response" in decision:
        return s.status in (S.APPROVED, S.RESPONDED) and s.response == decision["response"]
    if s.status == S.RESPONDED:
        return False
    return (
        s.approved == decision.get("approved")
        and (s.reason or "") == (decision.get("reason") or "")
        and s.modified_args == decision.get("modifiedArgs")
    )


_DECIDED_FIELDS = {"status", "approved", "reason", "modified_args"}


def decide(
    suspension: Suspension, user: Any, decision: dict[str, Any], now: datetime | None = None
) -> Decided:
    """Record a person's decision: {"approved", "reason", "modifiedArgs"} or {"response"}
    (the answer to a question, or, to a confirmation whose policy allows it, a reviewer's
    response: the tool does not run and the model gets the text as its result).

    The policy the suspension was made under is checked here, for every path that decides
    (agents.policy.check), with the thread's and the suspension's rows locked: raises
    Refused, changing nothing. Under a quorum an approval is a vote (a Vote row and
    SUSPENSION_VOTED) until the last one needed, which decides."""
    now = now or timezone.now()
    if "response" in decision and suspension.kind != Suspension.Kind.INPUT:
        fields = {"status": S.RESPONDED, "approved": None, "response": decision["response"]}
    elif "response" in decision:
        fields = {"status": S.APPROVED, "approved": True, "response": decision["response"]}
    else:
        fields = {
            "status": S.APPROVED if decision["approved"] else S.REJECTED,
            "approved": bool(decision["approved"]),
            "reason": decision.get("reason") or "",
            "modified_args": decision.get("modifiedArgs"),
        }
    extra: dict[str, Any] = {}
    with transaction.atomic():
        thread = statements.lock_thread(suspension.thread_id)  # [(created_by_id,)], or none
        # The suspension's row too: the votes of a quorum are counted under it, so of twenty
        # votes at once exactly the one that completes the count decides.
        locked = statements.lock_suspension(suspension.pk)
        if (
            locked is not None
            and locked.status == S.PENDING
            and (locked.expires_at is None or locked.expires_at > now)
        ):
            policy.check(locked, user, decision, thread[0][0] if thread else None)
            if policy.of(locked)["quorum"] > 1 and "response" not in decision:
                votes = _vote(locked, user, decision, now)
                if votes["approvals"] < votes["required"] and decision["approved"]:
                    return Decided(locked, created=True, votes=votes)
                if decision["approved"]:
                    # What the quorum approved: the latest edit (None: the arguments as sent).
                    fields["modified_args"] = locked.modified_args
                    extra = {"approved_by": votes["approved_by"], "quorum": votes["required"]}
        who = (getattr(user, "pk", None), getattr(user, "username", ""))
        if fields.keys() == _DECIDED_FIELDS and who[0] is not None:
            # The approval or rejection of a person: the same update, compiled once.
            values = (fields["status"], fields["approved"], fields["reason"])
            won = statements.decide_pending(
                suspension.pk, now, *who, *values, fields["modified_args"]
            )
        else:
            won = (
                Suspension.objects.filter(pk=suspension.pk, status=S.PENDING)
                .filter(Q(expires_at__isnull=True) | Q(expires_at__gt=now))
                .update(decided_by=user, decided_by_name=who[1], decided_at=now, **fields)
            )
        if not won:
            current = Suspension.objects.select_related("decided_by").get(pk=suspension.pk)
            if current.status == S.PENDING:
                # The deadline passed before the sweeper saw it: the clock decided first.
                _time_out(current, now)
                current.refresh_from_db()
            return Decided(current, created=False)
        # The row as the update left it, without reading it back: the locked row it changed
        # (`won` means it was pending, so `locked` is that row) with the fields it wrote.
        current = locked
        for name, value in fields.items():
            setattr(current, name, value)
        current.decided_by = user
        current.decided_by_name = getattr(user, "username", "")
        current.decided_at = now
        events.record(
            Event.Type.SUSPENSION_DECIDED,
            thread_id=current.thread_id,
            suspension_id=current.pk,
            actor=user,
            payload={
                "tool": current.tool_name,
                "agent": current.agent_name,
                **current.outcome(),
                **extra,
            },
        )
        _resume_if_group_done(current, now)
    return Decided(current, created=True)


def ignore(suspension: Suspension, user: Any, now: datetime | None = None) -> Decided:
    """Dismiss a pending suspension from the inbox without deciding it: it stays pending and
    its deadline still applies (its on_timeout decides it then, unless someone does first).

    Who may decide it may dismiss it, if its policy allows (agents.policy.check, under the
    same locks as decide); SUSPENSION_IGNORED records who and when. `created` is False when
    it was already dismissed, or is no longer pending (the caller answers with its outcome):
    a deadline already passed is applied first, as decide does."""
    now = now or timezone.now()
    with transaction.atomic():
        thread = Thread.objects.select_for_update().filter(pk=suspension.thread_id).first()
        locked = Suspension.objects.select_for_update().get(pk=suspension.pk)
        if locked.status == S.PENDING and locked.expires_at and locked.expires_at <= now:
            _time_out(locked, now)
            locked.refresh_from_db()
        if locked.status != S.PENDING or locked.ignored_at is not None:
            return Decided(locked, created=False)
        policy.check(locked, user, {"ignore": True}, thread.created_by_id if thread else None)
        name = getattr(user, "username", "")
        # An ignored request is closed for people: its ladder stops here, in the same
        # transaction (agents.reminders.apply_ladder_steps skips ignored ones as well).
        won = Suspension.objects.filter(
            pk=locked.pk, status=S.PENDING, ignored_at__isnull=True
        ).update(ignored_at=now, ignored_by=user, ignored_by_name=name, next_step_at=None)
        if not won:
            return Decided(Suspension.objects.get(pk=locked.pk), created=False)
        locked.ignored_at, locked.ignored_by, locked.ignored_by_name = now, user, name
        locked.next_step_at = None
        events.record(
            Event.Type.SUSPENSION_IGNORED,
            thread_id=locked.thread_id,
            suspension_id=locked.pk,
            actor=user,
            payload={
                "tool": locked.tool_name,
                "agent": locked.agent_name,
                "by": name or None,
                "at": now.isoformat(),
                "expires_at": _iso(locked.expires_at),
                "on_timeout": locked.on_timeout,
            },
        )
    return Decided(locked, created=True)


def _vote(s: Suspension, user: Any, decision: dict[str, Any], now: datetime) -> dict[str, Any]:
    """One reviewer's vote on a suspension that needs a quorum (the caller holds its lock).
    An approval with other arguments than the current proposal is a new proposal: the count
    starts again from it. Returns the count for the current proposal."""
    approved = bool(decision["approved"])
    edited = decision.get("modifiedArgs")
    if (
        approved
        and edited is not None
        and canonical_hash(edited) != canonical_hash(policy.proposal(s))
    ):
        Suspension.objects.filter(pk=s.pk).update(modified_args=edited)
        s.modified_args = edited
    digest = canonical_hash(policy.proposal(s))
    # A reviewer who approved may still reject: their vote becomes the rejection.
    Vote.objects.update_or_create(
        suspension=s,
        user=user,
        args_hash=digest,
        defaults={
            "user_name": getattr(user, "username", ""),
            "approved": approved,
            "reason": decision.get("reason") or "",
        },
    )
    approved_by = policy.approvals(s)
    votes = {
        "approvals": len(approved_by),
        "required": policy.of(s)["quorum"],
        "approved_by": approved_by,
    }
    if approved:
        events.record(
            Event.Type.SUSPENSION_VOTED,
            thread_id=s.thread_id,
            suspension_id=s.pk,
            actor=user,
            payload={
                "tool": s.tool_name,
                "agent": s.agent_name,
                "by": getattr(user, "username", ""),
                "approved": approved,
                "reason": decision.get("reason") or "",
                "edited_args": s.modified_args,
                "args_hash": digest,
                **votes,
            },
        )
    return votes


def _resume_if_group_done(s: Suspension, now: datetime) -> None:
    """The thread (or the agent instance) runs again once none of the group waits; the
    caller holds the thread's lock."""
    # One statement for the common case, a frame of the main stack: the thread is made
    # runnable if none of the group still waits.
    if statements.resume_main_stack(s.thread_id, s.group, s.frame_id, now):
        _enqueue(s.thread_id)
        return
    # Not the main stack's (an agent instance's frame has a lane), or still waiting: the
    # lane, when there is one and none of the group waits.
    pending = Suspension.objects.filter(group=s.group, status=S.PENDING)
    lane = StackFrame.objects.filter(pk=s.frame_id).values_list("lane_id", flat=True).first()
    if lane is not None:
        _resume_lanes([lane], now, unless=Exists(pending))
        return
    # The main stack's, with the thread running: its instances work (or one was let go on)
    # while the main frame waits for this decision too. It runs at once, as from suspended;
    # it then waits for its instances again (agents.run_status). An outside agent's run has
    # nothing to resume.
    n = (
        Thread.objects.filter(
            pk=s.thread_id,
            status=Thread.Status.RUNNING,
            runnable_since__isnull=True,
            external_run_id="",
        )
        .exclude(lease_expires_at__gt=now)
        .filter(~Exists(pending))
        .update(runnable_since=now, updated_at=now)
    )
    if n:
        _enqueue(s.thread_id)


def _resume_lanes(lanes: Any, now: datetime, unless: Any = None) -> None:
    """Agent instances whose suspensions are all decided run again (the thread's other
    instances, and its main stack, never stopped for them); none if `unless` (an Exists)
    holds."""
    found = StackFrame.objects.filter(
        pk__in=lanes, status=StackFrame.Status.ACTIVE, runnable_since__isnull=True
    )
    if unless is not None:
        found = found.filter(~unless)
    runnable = dict(found.values_list("pk", "thread_id"))
    if not runnable:
        return
    StackFrame.objects.filter(pk__in=runnable).update(runnable_since=now)
    # A run that was suspended because every instance waited is running again.
    run_status.lanes_resumed(list(runnable.values()), now)
    for pk in runnable:
        enqueue_instance(pk)


def _timeout_fields(s: Suspension, now: datetime) -> dict[str, Any]:
    approve = s.on_timeout == Suspension.OnTimeout.APPROVE
    return {
        "status": S.TIMED_OUT,
        "approved": approve,
        "reason": ("approved" if approve else "rejected") + " automatically at the deadline",
        "decided_at": now,
    }


def _timeout_event(s: Suspension) -> Event:
    approve = s.on_timeout == Suspension.OnTimeout.APPROVE
    return Event(
        type=Event.Type.SUSPENSION_TIMEOUT,
        thread_id=s.thread_id,
        suspension_id=s.pk,
        payload={
            "tool": s.tool_name,
            "agent": s.agent_name,
            "status": S.TIMED_OUT,
            "approved": approve,
            "on_timeout": s.on_timeout,
            "expires_at": s.expires_at.isoformat() if s.expires_at else None,
        },
    )


def _time_out(s: Suspension, now: datetime) -> bool:
    """Apply a suspension's on_timeout; the caller holds the thread's lock."""
    n = Suspension.objects.filter(pk=s.pk, status=S.PENDING).update(**_timeout_fields(s, now))
    if not n:
        return False
    events.record_many([_timeout_event(s)])
    _resume_if_group_done(s, now)
    return True


def expire_overdue(now: datetime | None = None, limit: int = 500, only: Any = None) -> int:
    """Apply on_timeout to pending suspensions past their deadline (or to the one named by
    `only`, if it is); returns how many. One transaction per batch of `limit`."""
    now = now or timezone.now()
    rows = Suspension.objects.filter(status=S.PENDING, expires_at__lte=now)
    if only is not None:
        rows = rows.filter(pk=only)
    with transaction.atomic():
        found = list(rows.order_by("expires_at").values_list("pk", "thread_id")[:limit])
        if not found:
            return 0
        # The threads' locks first, in one order (decide, cancel and the engine take a
        # thread's lock before its suspensions'), then the rows again: a decision that
        # committed meanwhile has taken them out of the pending set.
        thread_ids = sorted({t for _, t in found})
        list(
            Thread.objects.select_for_update()
            .filter(pk__in=thread_ids)
            .order_by("pk")
            .values_list("pk", flat=True)
        )
        overdue = list(rows.filter(pk__in=[pk for pk, _ in found]))
        if not overdue:
            return 0
        for on_timeout in Suspension.OnTimeout.values:
            same = [s for s in overdue if s.on_timeout == on_timeout]
            if same:
                Suspension.objects.filter(pk__in=[s.pk for s in same], status=S.PENDING).update(
                    **_timeout_fields(same[0], now)
                )
        events.record_many([_timeout_event(s) for s in overdue])
        groups = {s.group for s in overdue}
        open_groups = set(
            Suspension.objects.filter(group__in=groups, status=S.PENDING).values_list(
                "group", flat=True
            )
        )
        done = [s for s in overdue if s.group not in open_groups]
        lanes = dict(
            StackFrame.objects.filter(pk__in={s.frame_id for s in done}).values_list(
                "pk", "lane_id"
            )
        )
        _resume_lanes([lanes[s.frame_id] for s in done if lanes.get(s.frame_id)], now)
        complete = {s.thread_id for s in done if not lanes.get(s.frame_id)}
        runnable = list(
            Thread.objects.filter(pk__in=complete, status=Thread.Status.SUSPENDED).values_list(
                "pk", flat=True
            )
        )
        if runnable:
            Thread.objects.filter(pk__in=runnable).update(
                status=Thread.Status.RUNNING, runnable_since=now, updated_at=now
            )
            for pk in runnable:
                _enqueue(pk)
    return len(overdue)


def expire_all_overdue(budget: float = 10.0, limit: int = 500) -> int:
    """Batches of expire_overdue until none is left or `budget` seconds have passed (the
    next sweep goes on from there)."""
    started = time.monotonic()
    done = 0
    while True:
        n = expire_overdue(limit=limit)
        done += n
        if n < limit or time.monotonic() - started > budget:
            return done


def due_soon(within: timedelta, now: datetime | None = None, limit: int = 500) -> list[Any]:
    """Pending suspensions whose deadline falls in the coming `within`: (id, expires_at)."""
    now = now or timezone.now()
    return list(
        Suspension.objects.filter(
            status=S.PENDING, expires_at__gt=now, expires_at__lte=now + within
        )
        .order_by("expires_at")
        .values_list("pk", "expires_at")[:limit]
    )


# A thread enqueued again and still not taken waits twice as long before the next time, up to
# this many doublings: a long queue is not flooded with copies of the same thread.
MAX_REQUEUE_DOUBLINGS = 4


def requeue_stalled(now: datetime | None = None, limit: int = 200) -> int:
    """Enqueue again the runnable threads no worker has taken for a while (invariant 4).

    runnable_since is pushed into the future by the back-off: after its n-th re-enqueue a
    thread is due again STALLED_AFTER_SECONDS × 2^n later. A worker's claim resets both.
    """
    now = now or timezone.now()
    stalled = timedelta(seconds=settings.STALLED_AFTER_SECONDS)
    rows = list(
        Thread.objects.filter(status=Thread.Status.RUNNING, runnable_since__lt=now - stalled)
        .filter(Q(lease_expires_at__isnull=True) | Q(lease_expires_at__lt=now))
        .order_by("runnable_since")
        .values_list("pk", "requeues")[:limit]
    )
    lanes = list(
        StackFrame.objects.filter(
            instance__gt=0,
            status=StackFrame.Status.ACTIVE,
            runnable_since__lt=now - stalled,
        )
        .filter(Q(lease_expires_at__isnull=True) | Q(lease_expires_at__lt=now))
        .order_by("runnable_since")
        .values_list("pk", "requeues")[:limit]
    )
    if not rows and not lanes:
        return 0
    with transaction.atomic():
        for model, found in ((Thread, rows), (StackFrame, lanes)):
            for n in sorted({n for _, n in found}):
                wait = stalled * (2 ** min(n, MAX_REQUEUE_DOUBLINGS) - 1)
                model.objects.filter(pk__in=[pk for pk, m in found if m == n]).update(
                    runnable_since=now + wait, requeues=F("requeues") + 1
                )
        for pk, _ in rows:
            _enqueue(pk)
        for pk, _ in lanes:
            enqueue_instance(pk)
    return len(rows) + len(lanes)


class AlreadyFinished(Exception):
    """The thread has already ended."""


def cancel_thread(
    thread_id: Any,
    user: Any,
    now: datetime | None = None,
    reason: str = "the run was cancelled",
) -> Thread:
    """Unwind the whole stack: pending suspensions and active frames become cancelled."""
    now = now or timezone.now()
    with transaction.atomic():
        thread = Thread.objects.select_for_update().get(pk=thread_id)
        if thread.finished:
            raise AlreadyFinished(thread.status)
        pending = list(thread.suspensions.filter(status=S.PENDING))
        for s in pending:
            n = Suspension.objects.filter(pk=s.pk, status=S.PENDING).update(
                status=S.CANCELLED,
                approved=False,
                reason=reason,
                decided_by=user,
                decided_by_name=getattr(user, "username", ""),
                decided_at=now,
            )
            if n:
                events.record(
                    Event.Type.SUSPENSION_CANCELLED,
                    thread_id=thread.id,
                    suspension_id=s.pk,
                    actor=user,
                    payload={
                        "tool": s.tool_name,
                        "agent": s.agent_name,
                        "status": S.CANCELLED,
                        "decided_by": getattr(user, "username", None),
                    },
                )
        active = thread.frames.filter(status=StackFrame.Status.ACTIVE)
        unwound = [f.label for f in active.order_by("depth", "id")]
        instances = list(active.filter(instance__gt=0))
        active.update(
            status=StackFrame.Status.CANCELLED,
            updated_at=now,
            lease_owner="",
            lease_expires_at=None,
            runnable_since=None,
        )
        StackFrame.objects.filter(pk__in=[f.pk for f in instances]).update(finished_at=now)
        events.record_many(
            [
                Event(
                    type=Event.Type.INSTANCE_FINISHED,
                    thread_id=thread.id,
                    actor=user,
                    payload={
                        "instance": f.instance_name,
                        "frame_id": f.pk,
                        "agent": f.agent_name,
                        "index": f.instance,
                        "status": "cancelled",
                        "started_at": f.created_at.isoformat(),
                        "finished_at": now.isoformat(),
                        "duration_ms": int((now - f.created_at).total_seconds() * 1000),
                        "tools": list(f.tools_used),
                        "usage": {
                            "input_tokens": f.input_tokens,
                            "output_tokens": f.output_tokens,
                        },
                        "result": "",
                        "is_error": True,
                        "lane": f.pk,
                    },
                )
                for f in instances
            ]
        )
        thread.status = Thread.Status.CANCELLED
        thread.lease_owner = ""
        thread.lease_expires_at = None
        thread.save(update_fields=["status", "lease_owner", "lease_expires_at", "updated_at"])
        events.record(
            Event.Type.THREAD_CANCELLED,
            thread_id=thread.id,
            actor=user,
            payload={
                "status": thread.status,
                "cancelled_by": getattr(user, "username", None),
                "reason": reason,
                "suspensions_cancelled": len(pending),
                "frames_cancelled": unwound,
                "stack": [],
            },
        )
    return thread
