"""The one door for a person's decision: `take(suspension, actor, decision, *, proof=None)`.

Every channel that decides for someone (the REST API and its batch, A2A, Slack's buttons,
the step-up page) translates what it was sent into a `Decision`, calls `take`, and words
the `Outcome` in its own terms; none reads another layer's status codes to learn what
happened. `take` binds the decision to what was seen (agents.versions), makes a grant with
an approval (agents.grants), dismisses (ignore), and decides (agents.decisions.decide: the
policy, the locks, the events and the receipt, in one transaction). The clock's decisions
(agents.deadlines) and a policy's or a grant's at raise time are no person's and do not
come here. A reviewing model (agents.reviewing) is no person either, but decides after the
request is shown, as a reviewer would: it comes in by `take_by`, which shares `take`'s
decide (the locks, the events, the receipt) and answers with the same outcomes.
"""

from collections.abc import Mapping
from dataclasses import dataclass
from enum import StrEnum
from typing import Any

from agents import decisions, grants, policy, versions
from agents.models import Grant, Suspension, Thread

S = Suspension.Status


class Kind(StrEnum):
    APPROVE = "approve"  # with `arguments`: an edit, approved
    REJECT = "reject"
    RESPOND = "respond"  # an answer to a question, or a reviewer's response to a confirmation
    IGNORE = "ignore"  # dismissed from the inbox without deciding; its deadline still applies


@dataclass(frozen=True)
class Seen:
    """What the reviewer was shown: a decision on another view is unbound (agents.versions)."""

    args_hash: str | None = None
    agent_version: int | None = None


@dataclass(frozen=True)
class Decision:
    """A person's decision on one suspension, as every channel hands it to `take`."""

    kind: Kind
    reason: str = ""
    arguments: dict[str, Any] | None = None  # an edit: the arguments approved instead
    answer: str | None = None  # a response's text
    grant: grants.Terms | None = None  # with an approval: approve the next similar ones too
    seen: Seen | None = None
    confirm_version_change: bool = False

    def __post_init__(self) -> None:
        if (self.kind is Kind.RESPOND) != (self.answer is not None):
            raise ValueError("A response, and only a response, carries an answer.")
        if self.kind is not Kind.APPROVE and (self.arguments is not None or self.grant is not None):
            raise ValueError("Only an approval edits the arguments or makes a grant.")

    @classmethod
    def approve(
        cls,
        reason: str = "",
        *,
        arguments: dict[str, Any] | None = None,
        grant: grants.Terms | None = None,
        seen: Seen | None = None,
        confirm_version_change: bool = False,
    ) -> "Decision":
        """An approval; with `arguments`, of an edit; with `grant`, of the next ones too."""
        return cls(Kind.APPROVE, reason, arguments, None, grant, seen, confirm_version_change)

    @classmethod
    def reject(
        cls, reason: str = "", *, seen: Seen | None = None, confirm_version_change: bool = False
    ) -> "Decision":
        return cls(Kind.REJECT, reason, seen=seen, confirm_version_change=confirm_version_change)

    @classmethod
    def respond(
        cls, answer: str, *, seen: Seen | None = None, confirm_version_change: bool = False
    ) -> "Decision":
        return cls(
            Kind.RESPOND, answer=answer, seen=seen, confirm_version_change=confirm_version_change
        )

    @classmethod
    def ignore(
        cls, *, seen: Seen | None = None, confirm_version_change: bool = False
    ) -> "Decision":
        return cls(Kind.IGNORE, seen=seen, confirm_version_change=confirm_version_change)

    def recorded(self) -> dict[str, Any]:
        """The decision as agents.decisions, agents.policy and agents.versions read it."""
        found: dict[str, Any]
        if self.kind is Kind.IGNORE:
            found = {"ignore": True}
        elif self.kind is Kind.RESPOND:
            found = {"response": self.answer}
        else:
            found = {
                "approved": self.kind is Kind.APPROVE,
                "reason": self.reason,
                "modifiedArgs": self.arguments,
            }
        if self.seen is not None:
            seen = {"args_hash": self.seen.args_hash, "agent_version": self.seen.agent_version}
            found["seen"] = {k: v for k, v in seen.items() if v is not None}
        if self.confirm_version_change:
            found["confirmVersionChange"] = True
        return found


# What came of it ---------------------------------------------------------------------------


@dataclass(frozen=True)
class Decided:
    """This call decided it (for an ignore: dismissed it), with the grant it made, if any."""

    suspension: Suspension
    grant: Grant | None = None


@dataclass(frozen=True)
class Voted:
    """A vote toward a quorum, recorded; the request waits for more. `votes`: approvals,
    required, approved_by."""

    suspension: Suspension
    votes: dict[str, Any]


@dataclass(frozen=True)
class Repeat:
    """The same decision was recorded already (an ignore: it was dismissed already)."""

    suspension: Suspension


@dataclass(frozen=True)
class Conflict:
    """Another decision came first (a person's, or the deadline's): nothing changed."""

    suspension: Suspension
    by: str  # who decided: their name, "someone", or "the deadline"
    detail: str


@dataclass(frozen=True)
class Refused:
    """The request's policy refuses this person this decision (agents.policy.Refused)."""

    suspension: Suspension
    rule: str  # four_eyes, groups, already_voted, not_allowed, step_up, quorum, ...
    detail: str


@dataclass(frozen=True)
class Unbound:
    """The decision answers another view of the request (`stale_view`), or approves one
    whose agent or tool changed since without saying so (`version_changed`)."""

    suspension: Suspension
    code: str
    detail: str


Outcome = Decided | Voted | Repeat | Conflict | Refused | Unbound


def conflict(s: Suspension) -> Conflict:
    """What a late decision is told: who decided first, in words."""
    if s.status == S.TIMED_OUT:
        verdict = "approved" if s.approved else "rejected"
        detail = f"The deadline passed first: it was {verdict} automatically."
        return Conflict(s, "the deadline", detail)
    who = s.decided_by_name or "someone"
    return Conflict(s, who, f"{who} already decided: {s.status}.")


def _settled(s: Suspension, recorded: dict[str, Any]) -> Repeat | Conflict:
    return Repeat(s) if decisions.same_decision(s, recorded) else conflict(s)


def take(
    suspension: Suspension,
    actor: Any,
    decision: Decision,
    *,
    proof: Mapping[str, str] | None = None,
) -> Outcome:
    """Take `decision` on `suspension` for `actor` (authorized by the caller's channel). `proof`
    is the passkey a step-up approval was verified with (approvals.stepup): {"credential",
    "name"}; it goes into the receipt and the event. A decision on a request no longer
    pending is a repeat when it is the recorded one, else a conflict."""
    recorded = decision.recorded()
    if not suspension.pending:
        return _settled(suspension, recorded)
    if proof is not None:
        recorded["step_up"] = dict(proof)
    try:
        versions.check(suspension, recorded)
    except versions.Unbound as e:
        return Unbound(suspension, e.code, e.detail)
    try:
        if decision.kind is Kind.IGNORE:
            done = decisions.ignore(suspension, actor)
            if not done.suspension.pending:
                return conflict(done.suspension)
            return Decided(done.suspension) if done.created else Repeat(done.suspension)
        made = None
        if decision.grant is not None:
            taken, made = grants.approve_and_grant(suspension, actor, recorded, decision.grant)
        else:
            taken = decisions.decide(suspension, actor, recorded)
    except policy.Refused as e:
        return Refused(suspension, e.rule, e.detail)
    if taken.votes is not None:
        return Voted(taken.suspension, taken.votes)
    if taken.created:
        return Decided(taken.suspension, made)
    return _settled(taken.suspension, recorded)


def take_by(suspension: Suspension, machine: decisions.Machine, decision: Decision) -> Outcome:
    """Take `decision` (an approval as asked, or a rejection) on `suspension` for a decider
    that is no person (agents.decisions.Machine): decided, a repeat, a conflict (someone
    came first) or refused (the request does not allow it, or needs people)."""
    if decision.kind not in (Kind.APPROVE, Kind.REJECT) or decision.arguments is not None:
        raise ValueError("A decider that is no person approves as asked or rejects.")
    if decision.grant is not None:
        raise ValueError("A decider that is no person makes no grant.")
    recorded = decision.recorded()
    if not suspension.pending:
        return _settled(suspension, recorded)
    try:
        taken = decisions.decide(suspension, None, recorded, by=machine)
    except policy.Refused as e:
        return Refused(suspension, e.rule, e.detail)
    if taken.created:
        return Decided(taken.suspension)
    return _settled(taken.suspension, recorded)


def refusal(s: Suspension, actor: Any, decision: Decision) -> Refused | Unbound | None:
    """What `take` would refuse now, changing nothing: for a channel that takes several
    decisions together only when none is refused (A2A). `take` checks again under its locks."""
    if not s.pending:
        return None
    recorded = decision.recorded()
    try:
        versions.check(s, recorded)
    except versions.Unbound as e:
        return Unbound(s, e.code, e.detail)
    started_by = Thread.objects.filter(pk=s.thread_id).values_list("created_by_id", flat=True)
    started_by_id = started_by.first()
    try:
        policy.check(s, actor, recorded, started_by_id)
    except policy.Refused as e:
        return Refused(s, e.rule, e.detail)
    if decision.grant is not None:
        barred = grants.why_not(s, policy.Viewer.of(actor), started_by_id)
        if barred is not None:
            return Refused(s, *barred)
    return None
