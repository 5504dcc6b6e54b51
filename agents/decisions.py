"""Decisions on suspensions: approve, reject or respond, a quorum's votes, and ignore.

Each is one transaction that writes its events; a decision is a conditional update, so of
approve, reject, timeout and cancel exactly one wins (invariant 2). Every change that touches
a thread's suspensions locks the thread row first, so two decisions of one group cannot both
miss that the group is complete.
"""

from dataclasses import dataclass
from datetime import datetime
from typing import Any

from django.db import transaction
from django.utils import timezone

from agents import events, policy, receipts, statements
from agents.deadlines import time_out
from agents.groups import resume_if_group_done
from agents.hashing import canonical_hash
from agents.models import Event, Suspension, Vote
from agents.payloads import iso
from agents.tiers import Tier

S = Suspension.Status


@dataclass
class Taken:
    """What `decide` or `ignore` did (agents.door words it as an Outcome for the channels)."""

    suspension: Suspension
    created: bool  # this call took the decision, or cast its vote (False: it was already taken)
    # A quorum's vote that did not decide yet: who approved so far and how many are needed.
    votes: dict[str, Any] | None = None


@dataclass(frozen=True)
class Machine:
    """A decider that is no person: a reviewing model (agents.reviewing). It decides through
    `decide` like a person, under the same locks, with the same event and a signed receipt,
    but no person's checks apply to it (it has no account, groups or run of its own): only
    what the request allows (agents.policy.check_allowed, check_step_up) and no quorum."""

    name: str  # decided_by_name, as the trail shows it: "model:<model>"
    decider: dict[str, Any]  # the receipt's decider (agents.receipts)
    event: dict[str, Any]  # what its SUSPENSION_DECIDED adds to the payload
    tier: Tier


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


def decide(
    suspension: Suspension,
    user: Any,
    decision: dict[str, Any],
    now: datetime | None = None,
    tier: Tier = Tier.PERSON,
    by: Machine | None = None,
) -> Taken:
    """Record a person's decision: {"approved", "reason", "modifiedArgs"} or {"response"}
    (the answer to a question, or, to a confirmation whose policy allows it, a reviewer's
    response: the tool does not run and the model gets the text as its result).

    The policy the suspension was made under is checked here, for every path that decides
    (agents.policy.check), with the thread's and the suspension's rows locked: raises
    Refused, changing nothing. Under a quorum an approval is a vote (a Vote row and
    SUSPENSION_VOTED) until the last one needed, which decides. The decision's receipt is
    signed here too (agents.receipts), with the passkey of a step-up approval in it
    (`decision["step_up"]`: {"credential", "name"}, put there by approvals.stepup only, after
    it verified the reviewer's assertion; no API body may carry it).

    `tier` is who decides (agents.tiers), kept on the row for the figures: a person, or
    under a quorum the vote that completes it; a reviewing model deciding through this door
    passes its own. `by` is a decider that is no person (`user` is then None), whose own tier
    is kept."""
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
    fields["tier"] = tier if by is None else by.tier
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
            if by is None:
                policy.check(locked, user, decision, thread[0][0] if thread else None)
            else:
                _check_machine(locked, decision)
            if policy.of(locked)["quorum"] > 1 and "response" not in decision:
                votes = _vote(locked, user, decision, now)
                if votes["approvals"] < votes["required"] and decision["approved"]:
                    return Taken(locked, created=True, votes=votes)
                if decision["approved"]:
                    # What the quorum approved: the latest edit (None: the arguments as sent).
                    fields["modified_args"] = locked.modified_args
                    extra = {"approved_by": votes["approved_by"], "quorum": votes["required"]}
            # The receipt, signed under the locks (the thread's orders its chain) and written
            # by the decision's own update: the row is pending and locked, so that update wins.
            for name, value in fields.items():
                setattr(locked, name, value)
            locked.decided_by, locked.decided_at = user, now
            locked.decided_by_name = getattr(user, "username", "")
            decider = receipts.person(
                user, approved_by=extra.get("approved_by"), passkey=decision.get("step_up")
            )
            if by is not None:
                locked.decided_by_name, decider = by.name, by.decider
            fields["receipt"], fields["receipt_seq"] = receipts.signed(locked, decider)
        won = statements.decide_pending(suspension.pk, now, user, fields)
        if not won:
            current = Suspension.objects.select_related("decided_by").get(pk=suspension.pk)
            if current.status == S.PENDING:
                # The deadline passed before the sweeper saw it: the clock decided first.
                time_out(current, now)
                current.refresh_from_db()
            return Taken(current, created=False)
        # The row as the update left it, without reading it back: the locked row it changed
        # (`won` means it was pending, so `locked` is that row), given the fields it wrote
        # before the receipt was signed.
        assert locked is not None
        current = locked
        if by is not None:
            # decide_pending names a person's account; a decider that is no person, itself.
            Suspension.objects.filter(pk=current.pk).update(decided_by_name=by.name)
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
                **_passkey(decision),
                **(by.event if by is not None else {}),
            },
        )
        resume_if_group_done(current, now)
    return Taken(current, created=True)


def _check_machine(s: Suspension, decision: dict[str, Any]) -> None:
    """What a decider that is no person may not do: decide a quorum's request, or take a
    decision the request does not allow (a step_up approval needs a person's passkey)."""
    if policy.of(s)["quorum"] > 1:
        raise policy.Refused("quorum", "A quorum's request is decided by people.")
    policy.check_allowed(s, decision)
    policy.check_step_up(s, decision)


def _passkey(decision: dict[str, Any]) -> dict[str, Any]:
    """The passkey an approval of a step_up request was signed with, for its event:
    {"passkey": {"credential", "name"}} (approvals.stepup verified it), or nothing."""
    proof = decision.get("step_up")
    return {"passkey": dict(proof)} if proof else {}


def ignore(suspension: Suspension, user: Any, now: datetime | None = None) -> Taken:
    """Dismiss a pending suspension from the inbox without deciding it: it stays pending and
    its deadline still applies (its on_timeout decides it then, unless someone does first).

    Who may decide it may dismiss it, if its policy allows (agents.policy.check, under the
    same locks as decide); SUSPENSION_IGNORED records who and when. `created` is False when
    it was already dismissed, or is no longer pending (the caller answers with its outcome):
    a deadline already passed is applied first, as decide does."""
    now = now or timezone.now()
    with transaction.atomic():
        # The same locks, taken the same way, as decide.
        thread = statements.lock_thread(suspension.thread_id)  # [(created_by_id,)], or none
        locked = statements.lock_suspension(suspension.pk)
        if locked is None:
            raise Suspension.DoesNotExist(suspension.pk)
        if locked.status == S.PENDING and locked.expires_at and locked.expires_at <= now:
            time_out(locked, now)
            locked.refresh_from_db()
        if locked.status != S.PENDING or locked.ignored_at is not None:
            return Taken(locked, created=False)
        policy.check(locked, user, {"ignore": True}, thread[0][0] if thread else None)
        name = getattr(user, "username", "")
        # An ignored request is closed for people: its ladder stops here, in the same
        # transaction (agents.reminders.apply_ladder_steps skips ignored ones as well).
        won = Suspension.objects.filter(
            pk=locked.pk, status=S.PENDING, ignored_at__isnull=True
        ).update(ignored_at=now, ignored_by=user, ignored_by_name=name, next_step_at=None)
        if not won:
            return Taken(Suspension.objects.get(pk=locked.pk), created=False)
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
                "expires_at": iso(locked.expires_at),
                "on_timeout": locked.on_timeout,
            },
        )
    return Taken(locked, created=True)


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
                **_passkey(decision),
            },
        )
    return votes
