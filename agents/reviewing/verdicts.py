"""What the reviewing model said, applied: recommended, decided, escalated or failed.

`review` is the Celery task's one step (agents.tasks.review_suspension): it re-reads the
request, returns quietly when there is nothing to ask (decided meanwhile, asked already),
charges the agent's budget, asks the model with the facts the gateway derived
(agents.reviewing.facts), and records what came of it on the request (Suspension.review)
with a SUSPENSION_REVIEWED event, in one transaction. In `decide` mode an answer its setting
`may` take is taken through the one door (agents.door.take_by), in the same transaction:
the decision's event, receipt and tier name the model. Anything else leaves the request to
people, and the card says why.
"""

from datetime import datetime, timedelta
from typing import Any
from uuid import UUID

from django.db import transaction
from django.utils import timezone

from agents import door, events, locks
from agents.decisions import Machine
from agents.models import Event, ReviewCall, Suspension
from agents.reviewing import answers, asking, facts
from agents.reviewing.setting import Setting
from agents.tiers import Tier

RECOMMENDED = "recommended"
DECIDED = "decided"
ESCALATED = "escalated"
FAILED = "failed"
MAX_ERROR = 300


def machine(setting: Setting, reason: str) -> Machine:
    """The model as a decider: its name, and the digest of its prompt and setting."""
    name = f"model:{setting.model}"
    digest = answers.digest(setting)
    return Machine(
        name=name,
        decider={"kind": "model", "name": setting.model, "digest": digest},
        event={"model": {"name": setting.model, "digest": digest, "reason": reason}},
        tier=Tier.MODEL,
    )


def _record(s: Suspension, review: dict[str, Any], only_if_asked: bool = False) -> bool:
    """Keep what the model said on the request, and say so in its trail (in the caller's
    transaction, or one of its own). `only_if_asked`: only while the request is pending and
    still asked (a decision or an answer that came meanwhile stands). Whether it was kept."""
    with transaction.atomic():
        row = Suspension.objects.filter(pk=s.pk)
        if only_if_asked:
            row = row.filter(status=Suspension.Status.PENDING, review__outcome=asking.ASKED)
        if not row.update(review=review):
            return False
        s.review = review
        events.record(
            Event.Type.SUSPENSION_REVIEWED,
            thread_id=s.thread_id,
            suspension_id=s.pk,
            payload={"tool": s.tool_name, "agent": s.agent_name, **review},
        )
    return True


def _spent(s: Suspension, input_tokens: int, output_tokens: int) -> None:
    ReviewCall.objects.filter(suspension_id=s.pk).update(
        input_tokens=input_tokens, output_tokens=output_tokens
    )


def review(suspension_id: UUID | str, now: datetime | None = None) -> bool:
    """Ask the reviewing model about one request and apply its answer. False when there was
    nothing to ask."""
    now = now or timezone.now()
    s = Suspension.objects.select_related("thread").filter(pk=suspension_id).first()
    if s is None or not s.pending or (s.review or {}).get("outcome") != asking.ASKED:
        return False
    kept = (s.policy or {}).get("review")
    if not kept:
        return False
    setting = Setting.of(kept)
    said: dict[str, Any] = {"model": setting.model, "mode": setting.mode}
    charged = asking.charge(s, setting, now)
    if charged is asking.Charge.TWICE:
        # Asked already: by a worker still waiting for the answer (a duplicate delivery), or
        # by one that stopped during the call (this is its task delivered again, late).
        if not asking.abandoned(s, setting, now):
            return False
        error = "no answer recorded: the worker asking the model stopped during the call"
        _record(s, {**said, "outcome": FAILED, "error": error})
        return True
    if charged is asking.Charge.SPENT:
        error = f"budget spent: {setting.per_minute} calls a minute for agent {s.agent_name}"
        _record(s, {**said, "outcome": FAILED, "error": error})
        return True
    try:
        answer = answers.ask(setting, facts.quoted(facts.of(s)), s.tool_input)
    except answers.ReviewFailed as e:
        _spent(s, e.input_tokens, e.output_tokens)
        _record(s, {**said, "outcome": FAILED, "error": str(e)[:MAX_ERROR]})
        return True
    _spent(s, answer.input_tokens, answer.output_tokens)
    said |= {"recommendation": answer.decision, "reason": answer.reason}
    if not setting.decides:
        _record(s, {**said, "outcome": RECOMMENDED})
        return True
    if answer.decision not in setting.may:
        _record(s, {**said, "outcome": ESCALATED})
        return True
    reason = f"{setting.model}: {answer.reason}"
    decision = (
        door.Decision.approve(reason)
        if answer.decision == "approve"
        else door.Decision.reject(reason)
    )
    with transaction.atomic():
        outcome = door.take_by(s, machine(setting, answer.reason), decision)
        if isinstance(outcome, door.Decided):
            _record(s, {**said, "outcome": DECIDED})
        elif isinstance(outcome, door.Refused):
            _record(s, {**said, "outcome": ESCALATED, "error": outcome.detail[:MAX_ERROR]})
        else:
            # Someone (or the deadline) decided first: what the model said is only advice now.
            _record(s, {**said, "outcome": RECOMMENDED})
    return True


UNANSWERED = (
    "no answer recorded in time: the worker asking the model stopped, or its task was never taken"
)


def settle_unanswered(now: datetime | None = None, limit: int = 200) -> int:
    """The sweeper's part: a request still `asked` when its model's answer can no longer
    come (its setting's timeout and ABANDONED_AFTER past the call's start, or past the request
    when no call began) is said failed, so its card stops saying the model is being asked.
    The worker asking it stopped, or its task was lost (the broker away at the commit, a
    worker killed before it took it); a task of it that comes later finds nothing to ask
    (`review`). How many."""
    now = now or timezone.now()
    asked = Suspension.objects.filter(
        status=Suspension.Status.PENDING,
        review__outcome=asking.ASKED,
        created_at__lt=now - asking.ABANDONED_AFTER,
    ).order_by("created_at")
    done = 0
    for s in asked[:limit]:
        kept = (s.policy or {}).get("review")
        timeout = timedelta(seconds=Setting.of(kept).timeout if kept else 0)
        call = ReviewCall.objects.filter(suspension_id=s.pk).values_list("created_at", flat=True)
        began = call.first() or s.created_at
        if began + timeout + asking.ABANDONED_AFTER > now:
            continue  # a call may still be under way
        review = {key: (s.review or {}).get(key) for key in ("model", "mode")}
        review |= {"outcome": FAILED, "error": UNANSWERED}
        with transaction.atomic():
            # The thread's row first, as a decision and the events' chain take it.
            locks.thread(pk=s.thread_id)
            done += _record(s, review, only_if_asked=True)
    return done
