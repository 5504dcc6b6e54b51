"""Who may decide a suspension, and how: the policy in force, and the checks on a decision.

The keys a policy has, and its rules on arguments, are agents.rules. The policy in force is
built in layers, each key replacing the one below: the defaults, the tool's own
(agents.runtime.tools.Tool.policy), the agent's (AgentDefinition.policy), and the agent's for
that tool (AgentDefinition.policy["tools"][name]). The suspension keeps it (Suspension.policy)
so a reload of the agent file does not change who may decide a request already shown. `check`
is the one function every path that decides calls (agents.decisions.decide).
"""

from dataclasses import dataclass, field
from typing import Any

from django.conf import settings

from agents.hashing import canonical_hash
from agents.rules import ALLOW, KEYS, Measure, matches, rule_text, tallies_of
from agents.tiers import Tier

DECIDE_PERMISSION = "agents.decide_suspension"

DEFAULTS: dict[str, Any] = {
    "groups": [],
    "four_eyes": True,
    "quorum": 1,
    "auto_approve": [],
    "auto_reject": [],
    "allow_accept": True,
    "allow_edit": True,
    "allow_respond": False,
    "allow_ignore": True,
    "step_up": False,
    "allow_grants": True,
}


class Refused(Exception):
    """This person may not take this decision; `rule` names what refuses it (groups,
    four_eyes, already_voted, auto_reject, permission, not_allowed, step_up) and `detail` says
    why, for people."""

    def __init__(self, rule: str, detail: str) -> None:
        super().__init__(detail)
        self.rule = rule
        self.detail = detail


# The policy in force --------------------------------------------------------------------


def effective(agent_policy: dict[str, Any] | None, tool: Any) -> dict[str, Any]:
    """The policy a call of `tool` is decided under: the layers of the module's docstring."""
    agent_policy = agent_policy or {}
    result = dict(DEFAULTS)
    for layer in (
        getattr(tool, "policy", None) or {},
        {k: v for k, v in agent_policy.items() if k != "tools"},
        (agent_policy.get("tools") or {}).get(tool.name) or {},
    ):
        result.update({k: layer[k] for k in KEYS if k in layer})
    return result


def of(s: Any) -> dict[str, Any]:
    """The policy a suspension is decided under; one made before policies were kept gets
    the defaults and its tool's own."""
    if not s.policy:
        tool = s.registered_tool
        return effective({}, tool) if tool is not None else dict(DEFAULTS)
    return {**DEFAULTS, **s.policy}


@dataclass(frozen=True)
class Automatic:
    """A decision the rules take: approved or not, by which rule."""

    approved: bool
    key: str  # auto_approve | auto_reject
    index: int
    rule: dict[str, Any]

    @property
    def text(self) -> str:
        return rule_text(self.rule)

    @property
    def tier(self) -> Tier:
        """A rule with a count or a sum over history (agents.history) decides as `history`."""
        return Tier.HISTORY if tallies_of(self.rule) else Tier.RULE

    def _tier(self) -> dict[str, Any]:
        return {"tier": Tier.HISTORY.value} if self.tier == Tier.HISTORY else {}

    @property
    def reason(self) -> str:
        return f"rule {self.key}[{self.index}]: {self.text}"

    def payload(self) -> dict[str, Any]:
        found = {"by": "policy", "key": self.key, "index": self.index, "rule": self.text}
        return {**found, **self._tier()}

    def decider(self) -> dict[str, Any]:
        """Who decided, as the receipt says it (agents.receipts)."""
        found = {"kind": "rule", "key": self.key, "index": self.index, "rule": self.text}
        return {**found, **self._tier()}


def automatic(
    policy: dict[str, Any], args: Any, measure: Measure | None = None, approve: bool = True
) -> Automatic | None:
    """The decision the rules take on `args`, or None when a person must decide. Their
    counts and sums over history are read with `measure` (agents.history; without one they
    do not hold); `approve=False` reads only the auto_reject rules (a tainted call,
    agents.history.taint, may be refused by a rule but not approved by one)."""
    keys = [("auto_reject", False), ("auto_approve", True)][: 2 if approve else 1]
    for key, approved in keys:
        for i, rule in enumerate(policy.get(key) or []):
            if matches(rule, args, measure):
                return Automatic(approved, key, i, rule)
    return None


# Who may decide -------------------------------------------------------------------------


@dataclass
class Viewer:
    """What the checks need to know about a person, read once per request. The groups are
    read when a policy names some (most do not: no statement on a decision's hot path)."""

    pk: Any
    username: str
    known_groups: set[str] | None = None
    may_decide: bool = False
    user: Any = field(default=None, repr=False, compare=False)

    @property
    def groups(self) -> set[str]:
        if self.known_groups is None:
            names = self.user.groups.values_list("name", flat=True) if self.user else []
            self.known_groups = set(names)
        return self.known_groups

    @classmethod
    def of(cls, user: Any) -> "Viewer":
        if user is None or not getattr(user, "is_authenticated", False):
            return cls(None, "", set(), False)
        return cls(user.pk, user.get_username(), None, user.has_perm(DECIDE_PERMISSION), user)


def proposal(s: Any) -> Any:
    """The arguments the votes of a quorum approve: the latest edit, else the tool's input."""
    return s.modified_args if s.modified_args is not None else s.tool_input


def approvals(s: Any) -> list[str]:
    """Who approved the current proposal, in order (names as they were)."""
    if of(s)["quorum"] <= 1:
        return []
    digest = canonical_hash(proposal(s))
    return list(s.votes.filter(approved=True, args_hash=digest).values_list("user_name", flat=True))


def _one_of(groups: list[str]) -> str:
    if len(groups) == 1:
        return f"group {groups[0]}"
    return "groups " + ", ".join(groups[:-1]) + f" or {groups[-1]}"


def _more(n: int) -> str:
    return f"{n} more approval" + ("" if n == 1 else "s")


def why_not(
    s: Any, viewer: Viewer, started_by_id: int | None = None, approved_by: list[str] | None = None
) -> tuple[str, str] | None:
    """(rule, why) when `viewer` may not decide `s` now; None when they may. The reasons the
    card shows and the refusals of `check` come from here."""
    policy = of(s)
    if started_by_id is None:
        started_by_id = policy.get("started_by_id")
    if not viewer.may_decide:
        return "permission", "You do not have permission to decide requests."
    groups = policy["groups"]
    if groups and not viewer.groups & set(groups):
        return "groups", f"Only {_one_of(groups)} may decide this request."
    if policy["four_eyes"] and started_by_id is not None and started_by_id == viewer.pk:
        return "four_eyes", "You started this run; someone else must decide it (four eyes)."
    if policy["quorum"] > 1:
        approved_by = approvals(s) if approved_by is None else approved_by
        if viewer.username in approved_by:
            left = policy["quorum"] - len(approved_by)
            return "already_voted", f"You already approved; waiting for {_more(left)}."
    return None


def decision_kind(s: Any, decision: dict[str, Any]) -> str:
    """What a decision does: accept, edit, reject, respond (to a confirmation), answer (a
    question) or ignore. Arguments "edited" to what the agent asked are an accept."""
    if decision.get("ignore"):
        return "ignore"
    if "response" in decision:
        return "answer" if s.kind == "input" else "respond"
    if not decision.get("approved"):
        return "reject"
    edited = decision.get("modifiedArgs")
    if edited is not None and canonical_hash(edited) != canonical_hash(s.tool_input):
        return "edit"
    return "accept"


# Each decision kind a policy may forbid, by its flag, and how a refusal says so.
FORBIDDEN = {
    "accept": ("allow_accept", "approve it as asked; edit, answer or reject it"),
    "edit": ("allow_edit", "edit its arguments; approve or reject it as asked"),
    "respond": ("allow_respond", "answer the agent instead of deciding; approve or reject it"),
    "ignore": ("allow_ignore", "dismiss it without deciding; decide it before its deadline"),
}


def allowed(s: Any) -> dict[str, bool]:
    """Which decisions the request takes besides a rejection (the card offers these)."""
    policy = of(s)
    return {key.removeprefix("allow_"): bool(policy[key]) for key in ALLOW}


def check_allowed(s: Any, decision: dict[str, Any]) -> None:
    """Refuse a kind of decision the request's policy does not allow."""
    kind = decision_kind(s, decision)
    if kind in FORBIDDEN:
        key, what = FORBIDDEN[kind]
        if not of(s)[key]:
            raise Refused("not_allowed", f"{s.tool_name} does not let a reviewer {what}.")


def page_of(s: Any) -> str:
    """The address of the request's card on its thread's page (where a passkey can sign)."""
    return f"{settings.SITE_URL.rstrip('/')}/threads/{s.thread_id}/#s-{s.pk}"


def check_step_up(s: Any, decision: dict[str, Any]) -> None:
    """Refuse an approval of a `step_up` request that carries no passkey's proof. Only the
    page's view (approvals.stepup) puts `step_up` in a decision, after it verified the
    reviewer's WebAuthn assertion; no body parser lets a caller send it."""
    if not of(s)["step_up"] or decision_kind(s, decision) not in ("accept", "edit"):
        return
    if not decision.get("step_up"):
        raise Refused(
            "step_up",
            f"Approving {s.tool_name} needs your passkey: approve it on its page, "
            f"{page_of(s)} (rejecting needs none).",
        )


def check(s: Any, user: Any, decision: dict[str, Any], started_by_id: int | None) -> None:
    """May `user` take `decision` on `s`? Raises Refused with the reason. Edited arguments
    are checked again: the auto_reject rules apply to them."""
    viewer = Viewer.of(user)
    refused = why_not(s, viewer, started_by_id)
    if refused is not None:
        if refused[0] == "already_voted" and (
            not decision.get("approved", True) or decision.get("ignore")
        ):
            refused = None  # a reviewer who approved may still reject, or dismiss it
        elif (
            refused[0] == "already_voted"
            and decision.get("modifiedArgs") is not None
            and canonical_hash(decision["modifiedArgs"]) != canonical_hash(proposal(s))
        ):
            refused = None  # an edit is a new proposal, which they have not approved
    if refused is not None:
        raise Refused(*refused)
    check_allowed(s, decision)
    check_step_up(s, decision)
    edited = decision.get("modifiedArgs")
    if decision.get("approved") and edited is not None:
        for i, rule in enumerate(of(s)["auto_reject"]):
            if matches(rule, edited):
                raise Refused(
                    "auto_reject",
                    f"The edited arguments are refused by policy: auto_reject[{i}] "
                    f"{rule_text(rule)}.",
                )


def payload(s: Any) -> dict[str, Any]:
    """Who may decide and how far a quorum has come, as the card and the API show it (not
    who is looking: the page works that out, static/js/cards.js)."""
    policy = of(s)
    approved_by = approvals(s) if s.status == "pending" else []
    return {
        "groups": policy["groups"],
        "four_eyes": policy["four_eyes"],
        "quorum": policy["quorum"],
        "started_by": policy.get("started_by"),
        "approvals": len(approved_by),
        "approved_by": approved_by,
        "edited_args": s.modified_args if s.status == "pending" else None,
        "auto": policy.get("auto"),
        # The standing grant that approved it (agents.grants), by id and maker.
        "grant": policy.get("grant"),
        # Why a person is asked where a rule or a grant would not be enough (agents.history):
        # sentences, shown on the card (templates/approvals/_needs_person.html).
        "needs_person": policy.get("needs_person") or [],
        "allow": allowed(s),
        "step_up": bool(policy["step_up"]),
    }


def viewer_payload(s: Any, viewer: Viewer, started_by_id: int | None = None) -> dict[str, Any]:
    """May this person decide it, and if not, why."""
    if s.status != "pending":
        return {"may_decide": False, "why_not": None, "rule": None}
    refused = why_not(s, viewer, started_by_id)
    return {
        "may_decide": refused is None,
        "rule": refused[0] if refused else None,
        "why_not": refused[1] if refused else None,
    }


def snapshot(policy: dict[str, Any], thread: Any) -> dict[str, Any]:
    """What a suspension keeps: the policy in force and who started the run."""
    return {
        **policy,
        "started_by": thread.created_by_name or None,
        "started_by_id": thread.created_by_id,
    }
