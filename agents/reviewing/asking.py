"""Which requests go to the reviewing model, sent to it after commit, and its budget.

A request goes to the model when its policy in force has a `review` setting and no rule or
grant decided it, within the bounds the policy sets: never a question, a `step_up` request, a
quorum's, one a rule over history or taint left to a person (agents.history: the policy's
`needs_person`), nor a call of an `irreversible` tool unless the setting says
`irreversible: true`. A request a rule refused is decided already and never gets here.
"""

import functools
from datetime import datetime, timedelta
from enum import Enum
from typing import Any

from celery import current_app
from django.db import IntegrityError, transaction

from agents import dispatch, locks
from agents.models import ReviewCall, Suspension
from agents.reviewing.setting import Setting

REVIEW_TASK = "agents.tasks.review_suspension"
# Suspension.review["outcome"] while the model has not answered yet.
ASKED = "asked"
MINUTE = timedelta(minutes=1)
# A call charged this long past its setting's timeout, with no answer recorded, was abandoned:
# the worker making it stopped (agents.reviewing.verdicts says so on the request).
ABANDONED_AFTER = timedelta(seconds=30)


def out_of_bounds(kept: dict[str, Any], tool: Any, setting: Setting) -> str | None:
    """Why the model may not have this request (a policy's bound, in words), or None."""
    if getattr(tool, "kind", "confirmation") != Suspension.Kind.CONFIRMATION:
        return "a question is answered by people"
    if kept.get("step_up"):
        return "approving it needs a passkey (step_up)"
    if int(kept.get("quorum") or 1) > 1:
        return "it needs a quorum of people"
    if kept.get("needs_person"):
        return "its policy asks a person"
    if getattr(tool, "irreversible", False) and not setting.irreversible:
        return "the tool is irreversible"
    return None


def ask_later(s: Suspension, tool: Any) -> None:
    """Where a request is raised (agents.suspending, agents.external), before its insert:
    when no rule or grant decided it and its policy asks a reviewing model, mark it asked
    (Suspension.review) and send the model's task once the request is committed."""
    review = (s.policy or {}).get("review")
    if not review or s.status != Suspension.Status.PENDING:
        return
    setting = Setting.of(review)
    if out_of_bounds(s.policy, tool, setting) is not None:
        return
    s.review = {"model": setting.model, "mode": setting.mode, "outcome": ASKED}
    task = current_app.tasks[REVIEW_TASK]
    transaction.on_commit(functools.partial(dispatch.send, task, str(s.pk)))


def abandoned(s: Suspension, setting: Setting, now: datetime) -> bool:
    """Was this request's call charged long enough ago that its worker must have stopped?"""
    since = now - timedelta(seconds=setting.timeout) - ABANDONED_AFTER
    return ReviewCall.objects.filter(suspension_id=s.pk, created_at__lt=since).exists()


class Charge(Enum):
    CHARGED = "charged"
    SPENT = "spent"  # the agent's calls of the last minute are `per_minute` already
    TWICE = "twice"  # this request was charged already: a task delivered twice asks once


def charge(s: Suspension, setting: Setting, now: datetime) -> Charge:
    """Count one call of the model against its agent's budget (`per_minute`, across every
    worker: the agent's row is locked while its last minute's calls are counted and this one
    written)."""
    with transaction.atomic():
        locks.agent(name=s.agent_name)
        if ReviewCall.objects.filter(suspension_id=s.pk).exists():
            return Charge.TWICE
        recent = ReviewCall.objects.filter(agent_name=s.agent_name, created_at__gt=now - MINUTE)
        if recent.count() >= setting.per_minute:
            return Charge.SPENT
        try:
            with transaction.atomic():
                ReviewCall.objects.create(
                    suspension=s,
                    thread_id=s.thread_id,
                    agent_name=s.agent_name,
                    model=setting.model,
                    created_at=now,
                )
        except IntegrityError:
            return Charge.TWICE
    return Charge.CHARGED
