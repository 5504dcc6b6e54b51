"""Standing grants: a reviewer approves a request and, with it, the next similar ones.

A grant names the agent (or MCP server) and the tool, optional conditions on the arguments
(the policy's rule language, agents.rules: data, nothing evaluated), a lifetime (at most
MAX_GRANT_SECONDS), a count (at most MAX_GRANT_USES), and optionally the run or the requester
it is for. Whoever may decide the request may make one with its approval (`approve_and_grant`),
unless the request's policy bars it (`barred`: a quorum above 1, `step_up`, `allow_grants:
false`, a question). A request that one matches is raised already approved (`decide_by_grant`,
which the three places that raise requests call: agents.suspending, agents.external, and so the
MCP gateway's gated calls): AGENT_SUSPENDED as pending, SUSPENSION_DECIDED by the grant, and
GRANT_USED. A use is spent by one conditional UPDATE, so of two requests racing for the last
use exactly one wins. Under four eyes a grant never approves a run its maker started.
"""

from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any, TypeGuard
from uuid import UUID

from django.conf import settings
from django.db import transaction
from django.db.models import F, Q
from django.utils import timezone

from agents import decisions, events, history, policy
from agents.models import Event, Grant, Suspension, Thread
from agents.payloads import iso
from agents.request_statements import live_grants
from agents.rules import check_condition, matches, rule_text
from agents.tiers import Tier

S = Suspension.Status
MAX_CONDITIONS = 20
# The proposal: this many identical approvals by people within PROPOSAL_WINDOW.
PROPOSAL_AFTER = 3
PROPOSAL_WINDOW = timedelta(days=1)
SCOPES = ("any", "run", "requester")


class GrantError(ValueError):
    """A grant's terms that cannot be used; `field` names which."""

    def __init__(self, field: str, detail: str) -> None:
        super().__init__(detail)
        self.field = field
        self.detail = detail


@dataclass(frozen=True)
class Terms:
    """What a reviewer grants: for how long, how many times, on which arguments, for whom."""

    seconds: int
    max_uses: int
    conditions: tuple[dict[str, Any], ...] = ()
    scope: str = "any"  # any | run (this request's run) | requester (whoever asked this one)

    @classmethod
    def check(cls, data: dict[str, Any]) -> "Terms":
        """Terms from a body's `grant` object; raises GrantError naming the field."""
        seconds, uses = data.get("seconds"), data.get("max_uses")
        if not _whole(seconds) or not 1 <= seconds <= settings.MAX_GRANT_SECONDS:
            raise GrantError("seconds", f"From 1 to {settings.MAX_GRANT_SECONDS} seconds.")
        if not _whole(uses) or not 1 <= uses <= settings.MAX_GRANT_USES:
            raise GrantError("max_uses", f"From 1 to {settings.MAX_GRANT_USES} requests.")
        conds = data.get("conditions") or []
        if not isinstance(conds, list) or len(conds) > MAX_CONDITIONS:
            raise GrantError("conditions", f"A list of at most {MAX_CONDITIONS} conditions.")
        try:
            checked = tuple(check_condition(c, f"conditions[{i}]") for i, c in enumerate(conds))
        except ValueError as e:
            raise GrantError("conditions", str(e)) from None
        scope = data.get("scope") or "any"
        if scope not in SCOPES:
            raise GrantError("scope", f"One of {', '.join(SCOPES)}.")
        return cls(seconds, uses, checked, scope)


def _whole(n: Any) -> TypeGuard[int]:
    return isinstance(n, int) and not isinstance(n, bool)


def conditions_text(conditions: Any) -> str:
    """The conditions as people read them; "any arguments" when there are none."""
    return rule_text({"all": list(conditions)}) if conditions else "any arguments"


# What bars a grant --------------------------------------------------------------------


def barred(
    in_force: dict[str, Any], kind: str = Suspension.Kind.CONFIRMATION
) -> tuple[str, str] | None:
    """(rule, why) when a policy in force forbids grants on its tool; None when it allows."""
    if kind != Suspension.Kind.CONFIRMATION:
        return "kind", "A question is answered each time; it cannot be granted ahead."
    if (in_force.get("quorum") or 1) > 1:
        return "quorum", f"It needs {in_force['quorum']} approvals; it cannot be granted ahead."
    if in_force.get("step_up"):
        return "step_up", "It needs a passkey at each approval; it cannot be granted ahead."
    if in_force.get("allow_grants") is False:
        return "allow_grants", "Its policy forbids standing grants (allow_grants: false)."
    return None


def why_not(
    s: Suspension, viewer: policy.Viewer, started_by_id: int | None = None
) -> tuple[str, str] | None:
    """(rule, why) when `viewer` may not grant requests like `s`; None when they may: they
    may decide it (agents.policy.why_not: groups, four eyes on their own run) and its
    policy allows grants."""
    return policy.why_not(s, viewer, started_by_id) or barred(policy.of(s), s.kind)


# Making, revoking and running out --------------------------------------------------------


def approve_and_grant(
    s: Suspension, user: Any, decision: dict[str, Any], terms: Terms, now: datetime | None = None
) -> tuple[decisions.Taken, Grant | None]:
    """Approve `s` as agents.decisions.decide does and make the grant, in one transaction:
    both or neither. Raises policy.Refused when the grant is barred; no grant is made when
    the request was decided meanwhile (the Taken says so)."""
    now = now or timezone.now()
    if not decision.get("approved") or "response" in decision:
        raise policy.Refused("not_allowed", "A grant goes with an approval.")
    with transaction.atomic():
        started_by = Thread.objects.filter(pk=s.thread_id).values_list("created_by_id", flat=True)
        refused = why_not(s, policy.Viewer.of(user), started_by.first())
        if refused is not None:
            raise policy.Refused(*refused)
        decided = decisions.decide(s, user, decision, now)
        if not decided.created or decided.suspension.status != S.APPROVED:
            return decided, None
        return decided, create(decided.suspension, user, terms, now)


def create(s: Suspension, user: Any, terms: Terms, now: datetime) -> Grant:
    """The grant, made with the decision on `s` (the caller checked who may make it)."""
    thread = Thread.objects.only("pk", "created_by_id", "created_by_name").get(pk=s.thread_id)
    g = Grant.objects.create(
        agent_name=s.agent_name,
        tool_name=s.tool_name,
        conditions=list(terms.conditions),
        thread=thread if terms.scope == "run" else None,
        requester_id=thread.created_by_id if terms.scope == "requester" else None,
        requester_name=thread.created_by_name if terms.scope == "requester" else "",
        max_uses=terms.max_uses,
        created_by=user,
        created_by_name=getattr(user, "username", ""),
        created_at=now,
        expires_at=now + timedelta(seconds=terms.seconds),
        made_with=s,
    )
    events.record(
        Event.Type.GRANT_CREATED,
        thread_id=s.thread_id,
        suspension_id=s.pk,
        actor=user,
        payload=payload(g, now),
    )
    return g


def revoke(grant_id: UUID, user: Any, now: datetime | None = None) -> tuple[Grant, bool]:
    """Stop a grant at once: no request is approved by it after this commits. True when this
    call revoked it (False: it was revoked already)."""
    now = now or timezone.now()
    name = getattr(user, "username", "")
    with transaction.atomic():
        won = Grant.objects.filter(pk=grant_id, revoked_at__isnull=True).update(
            revoked_at=now, revoked_by_name=name
        )
        g = Grant.objects.get(pk=grant_id)
        if won:
            events.record(Event.Type.GRANT_REVOKED, actor=user, payload=payload(g, now))
    return g, bool(won)


def expire_all(now: datetime | None = None, limit: int = 500) -> int:
    """Record GRANT_EXPIRED, once, for each grant whose lifetime passed or whose count was
    spent (the sweeper, agents.tasks.sweep). A revoked grant has its GRANT_REVOKED."""
    now = now or timezone.now()
    due = Grant.objects.filter(ended_at__isnull=True, revoked_at__isnull=True).filter(
        Q(expires_at__lte=now) | Q(uses__gte=F("max_uses"))
    )
    done = 0
    for g in due[:limit]:
        with transaction.atomic():
            if Grant.objects.filter(pk=g.pk, ended_at__isnull=True).update(ended_at=now):
                why = "used_up" if g.uses >= g.max_uses else "lifetime"
                body = {**payload(g, now), "why": why}
                events.record(Event.Type.GRANT_EXPIRED, payload=body)
                done += 1
    return done


# Deciding by a grant ---------------------------------------------------------------------


@dataclass(frozen=True)
class ByGrant:
    """A request a grant approves: the suspension's fields, what its policy keeps, and the
    events after its AGENT_SUSPENDED."""

    grant: Grant
    now: datetime

    @property
    def who(self) -> dict[str, Any]:
        return {"id": str(self.grant.pk), "granted_by": self.grant.created_by_name or None}

    def fields(self) -> dict[str, Any]:
        g = self.grant
        return {
            "status": S.APPROVED,
            "approved": True,
            "reason": f"grant {str(g.pk)[:8]} by {g.created_by_name or 'someone'}: "
            f"{g.tool_name} when {conditions_text(g.conditions)}",
            "decided_by_name": "grant",
            "decided_at": self.now,
            "tier": Tier.GRANT,
        }

    def decider(self) -> dict[str, Any]:
        """Who decided, as the decision's signed receipt names it (agents.receipts)."""
        return {"kind": "grant", "grant": str(self.grant.pk), "granted_by": self.who["granted_by"]}

    def kept(self) -> dict[str, Any]:
        """Kept in the suspension's policy (like a rule's `auto`): the card names the grant."""
        return {**self.who, "conditions": conditions_text(self.grant.conditions)}

    def events(self, s: Suspension) -> list[tuple[str, dict[str, Any]]]:
        """SUSPENSION_DECIDED by the grant, then GRANT_USED; no person is their actor."""
        g = self.grant
        decided = {"tool": s.tool_name, "agent": s.agent_name, **s.outcome()}
        used = {**payload(g, self.now), "suspension": str(s.pk)}
        return [
            (Event.Type.SUSPENSION_DECIDED, {**decided, "by": "grant", "grant": self.who}),
            (Event.Type.GRANT_USED, used),
        ]


def decide_by_grant(
    agent_name: str,
    tool_name: str,
    args: Any,
    in_force: dict[str, Any],
    thread: Thread,
    kind: str = Suspension.Kind.CONFIRMATION,
    now: datetime | None = None,
) -> ByGrant | None:
    """The grant that approves this request, its use spent (in the caller's transaction,
    which raises the request), or None when the request waits for a person. Each candidate
    is tried with one conditional UPDATE: a grant spent, revoked or expired meanwhile is
    passed over, so two requests racing for its last use cannot both have it."""
    if barred(in_force, kind) is not None:
        return None
    now = now or timezone.now()
    started_by = thread.created_by_id
    candidates = live_grants(agent_name, tool_name, now, thread.pk, started_by)
    if not candidates:
        return None
    # A grant's counts and sums over history (agents.tallies) are read as a rule's are.
    window = history.Window.of(agent_name, tool_name, args, thread, now)
    for g in candidates:
        if g.conditions and not matches({"all": g.conditions}, args, window.measure):
            continue
        if in_force.get("four_eyes", True) and started_by is not None:
            if g.created_by_id == started_by:
                continue  # four eyes: its maker's own run waits for someone else
        spent = Grant.objects.filter(
            pk=g.pk, uses__lt=F("max_uses"), revoked_at__isnull=True, expires_at__gt=now
        ).update(uses=F("uses") + 1)
        if spent:
            g.uses = Grant.objects.filter(pk=g.pk).values_list("uses", flat=True).get()
            return ByGrant(g, now)
    return None


# What pages and the API show -------------------------------------------------------------


def state(g: Grant, now: datetime) -> str:
    if g.revoked_at is not None:
        return "revoked"
    if g.uses >= g.max_uses:
        return "used_up"
    if g.expires_at <= now:
        return "expired"
    return "active"


def payload(g: Grant, now: datetime | None = None) -> dict[str, Any]:
    """A grant as the API, its events and the page show it."""
    now = now or timezone.now()
    return {
        "id": str(g.pk),
        "agent": g.agent_name,
        "tool": g.tool_name,
        "conditions": g.conditions,
        "conditions_text": conditions_text(g.conditions),
        "run": str(g.thread_id) if g.thread_id else None,
        "requester": g.requester_name or None,
        "max_uses": g.max_uses,
        "uses": g.uses,
        "left": max(g.max_uses - g.uses, 0),
        "granted_by": g.created_by_name or None,
        "created_at": iso(g.created_at),
        "expires_at": iso(g.expires_at),
        "revoked_at": iso(g.revoked_at),
        "revoked_by": g.revoked_by_name or None,
        "made_with": str(g.made_with_id) if g.made_with_id else None,
        "state": state(g, now),
    }


def offer(s: Suspension) -> list[dict[str, Any]]:
    """Conditions a grant form offers for `s`: its top-level plain arguments, each equal to
    its value here (a reviewer may tick, change or drop each)."""
    args = s.tool_input if isinstance(s.tool_input, dict) else {}
    found = []
    for name, value in list(args.items())[:MAX_CONDITIONS]:
        plain = isinstance(value, (bool, int, float)) or (
            isinstance(value, str) and len(value) <= 200
        )
        if plain and name and "." not in name:
            found.append({"arg": name, "op": "==", "value": value})
    return found


def proposal(
    s: Suspension, viewer: policy.Viewer, now: datetime | None = None
) -> dict[str, Any] | None:
    """A proposal to grant, for a request like ones people approved PROPOSAL_AFTER times
    within PROPOSAL_WINDOW (the same agent, tool and arguments), when `viewer` may grant it;
    None otherwise. It only fills the card's form: nothing is granted without a click."""
    if s.status != S.PENDING or not s.args_hash or why_not(s, viewer) is not None:
        return None
    now = now or timezone.now()
    approved = (
        Suspension.objects.filter(
            agent_name=s.agent_name,
            tool_name=s.tool_name,
            args_hash=s.args_hash,
            status=S.APPROVED,
            decided_by__isnull=False,
            decided_at__gte=now - PROPOSAL_WINDOW,
        )
        .exclude(pk=s.pk)
        .count()
    )
    if approved < PROPOSAL_AFTER:
        return None
    return {"approvals": approved, "conditions": offer(s)}
