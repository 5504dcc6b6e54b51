"""Who may decide a suspension, and how: groups, four eyes, a quorum, and rules on arguments.

A policy is a mapping with any of these keys:

- `groups`: the groups whose members may decide (a list of names); left out, anyone with the
  `agents.decide_suspension` permission may (the reviewers group).
- `four_eyes`: whoever started the run (a person, or the token of a person) may not decide
  it. True unless a policy says otherwise: every suspension comes from a blocking tool.
- `quorum`: how many distinct permitted reviewers must approve; any rejection rejects at once,
  and an edit of the arguments starts the count again (the others approved something else).
- `auto_approve` / `auto_reject`: rules on the arguments that decide as the suspension is
  made, audited as decided by policy. A rule is a condition `{arg, op, value}` or
  `{all: [conditions]}`; the first rule that holds decides, and auto_reject is read first.
  `arg` is a name, or a dotted path into nested objects (`payee.country`); `op` is one of
  OPS. Ordering compares numbers only; a condition on an argument that is missing, or of the
  wrong type, does not hold. There is no expression language: nothing is evaluated.
- `allow_accept`, `allow_edit`, `allow_respond`, `allow_ignore`: which decisions a reviewer may
  take besides rejecting (which is always allowed: saying no is always safe), like Agent
  Inbox's flags: approve as asked, approve edited arguments, answer the agent instead of
  deciding (the model gets the answer as the call's result), dismiss from the inbox without
  deciding (the deadline still applies). By default all but respond are allowed. A question
  (an input tool) is always answered in text, whatever allow_respond says.

The policy in force is built in layers, each key replacing the one below: the defaults, the
tool's own (agents.runtime.tools.Tool.policy), the agent's (AgentDefinition.policy), and the
agent's for that tool (AgentDefinition.policy["tools"][name]). The suspension keeps it
(Suspension.policy) so a reload of the agent file does not change who may decide a request
already shown. `check` is the one function every path that decides calls (agents.actions.decide).
"""

from dataclasses import dataclass, field
from typing import Any

from agents.hashing import canonical_hash

ALLOW = ("allow_accept", "allow_edit", "allow_respond", "allow_ignore")
KEYS = ("groups", "four_eyes", "quorum", "auto_approve", "auto_reject", *ALLOW)
OPS = ("==", "!=", "<", "<=", ">", ">=", "in", "not in")
ORDERING = ("<", "<=", ">", ">=")
DECIDE_PERMISSION = "agents.decide_suspension"
MAX_QUORUM = 20
MAX_RULES = 50

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
}


class PolicyError(ValueError):
    """A policy that cannot be used; the message names the key."""


class Refused(Exception):
    """This person may not take this decision; `rule` names what refuses it (groups,
    four_eyes, already_voted, auto_reject, permission) and `detail` says why, for people."""

    def __init__(self, rule: str, detail: str) -> None:
        super().__init__(detail)
        self.rule = rule
        self.detail = detail


# Checking a policy -------------------------------------------------------------------------


def _number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def _scalar(value: Any) -> bool:
    return value is None or isinstance(value, (str, bool, int, float))


def check_condition(cond: Any, where: str) -> dict[str, Any]:
    if not isinstance(cond, dict) or set(cond) != {"arg", "op", "value"}:
        raise PolicyError(f"{where}: a condition is {{arg: name, op: '<', value: 100}}")
    arg, op, value = cond["arg"], cond["op"], cond["value"]
    if not isinstance(arg, str) or not arg or any(not part for part in arg.split(".")):
        raise PolicyError(f"{where}: 'arg' names an argument, like amount or payee.country")
    if op not in OPS:
        raise PolicyError(f"{where}: 'op' must be one of {', '.join(OPS)}, not {op!r}")
    if op in ORDERING and not _number(value):
        raise PolicyError(f"{where}: {op} compares numbers; 'value' must be a number")
    if op in ("in", "not in") and (
        not isinstance(value, list) or not all(_scalar(v) for v in value)
    ):
        raise PolicyError(f"{where}: {op} needs a list of plain values as 'value'")
    if op in ("==", "!=") and not _scalar(value):
        raise PolicyError(f"{where}: {op} compares with a plain value (text, number, true/false)")
    return {"arg": arg, "op": op, "value": value}


def check_rule(rule: Any, where: str) -> dict[str, Any]:
    if isinstance(rule, dict) and set(rule) == {"all"}:
        conds = rule["all"]
        if not isinstance(conds, list) or not conds:
            raise PolicyError(f"{where}: 'all' is a non-empty list of conditions")
        return {"all": [check_condition(c, f"{where}.all[{i}]") for i, c in enumerate(conds)]}
    return check_condition(rule, where)


def check_keys(policy: Any, where: str) -> dict[str, Any]:
    """One layer of policy (without "tools"), checked; raises PolicyError."""
    if not isinstance(policy, dict):
        raise PolicyError(f"{where}: a policy is a mapping of {', '.join(KEYS)}")
    unknown = sorted(set(policy) - set(KEYS))
    if unknown:
        raise PolicyError(f"{where}: unknown key(s) {unknown}; the keys are {', '.join(KEYS)}")
    found: dict[str, Any] = {}
    if "groups" in policy:
        groups = policy["groups"]
        if isinstance(groups, str):
            groups = [groups]
        if not isinstance(groups, list) or not all(isinstance(g, str) and g for g in groups):
            raise PolicyError(f"{where}.groups: a list of group names")
        found["groups"] = list(dict.fromkeys(groups))
    for key in ("four_eyes", *ALLOW):
        if key in policy:
            if not isinstance(policy[key], bool):
                raise PolicyError(f"{where}.{key}: true or false")
            found[key] = policy[key]
    if "quorum" in policy:
        q = policy["quorum"]
        if isinstance(q, bool) or not isinstance(q, int) or not 1 <= q <= MAX_QUORUM:
            raise PolicyError(f"{where}.quorum: a whole number from 1 to {MAX_QUORUM}")
        found["quorum"] = q
    for key in ("auto_approve", "auto_reject"):
        if key in policy:
            rules = policy[key]
            if not isinstance(rules, list) or len(rules) > MAX_RULES:
                raise PolicyError(f"{where}.{key}: a list of at most {MAX_RULES} rules")
            found[key] = [check_rule(r, f"{where}.{key}[{i}]") for i, r in enumerate(rules)]
    return found


def check_policy(policy: Any, where: str, tools: list[str] | None = None) -> dict[str, Any]:
    """An agent's policy: its keys, and "tools" with the same keys per tool (each one of
    `tools`, when given). Returns it as stored; raises PolicyError."""
    if policy is None:
        return {}
    if not isinstance(policy, dict):
        raise PolicyError(f"{where}: a policy is a mapping of {', '.join((*KEYS, 'tools'))}")
    per_tool = policy.get("tools") or {}
    found = check_keys({k: v for k, v in policy.items() if k != "tools"}, where)
    if not isinstance(per_tool, dict):
        raise PolicyError(f"{where}.tools: a mapping of tool names to policies")
    checked = {}
    for name, layer in per_tool.items():
        if tools is not None and name not in tools:
            raise PolicyError(f"{where}.tools: names '{name}', which is not in its tools")
        checked[name] = check_keys(layer or {}, f"{where}.tools.{name}")
    if checked:
        found["tools"] = checked
    return found


def groups_named(policy: dict[str, Any]) -> set[str]:
    """Every group an agent's policy names, at the top and per tool."""
    layers = [policy, *(policy.get("tools") or {}).values()]
    return {g for layer in layers for g in layer.get("groups") or []}


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
        from agents.runtime.tools import registry

        tool = registry.get(s.tool_name)
        return effective({}, tool) if tool is not None else dict(DEFAULTS)
    return {**DEFAULTS, **s.policy}


# Rules on arguments -------------------------------------------------------------------------

_MISSING = object()


def _lookup(args: Any, path: str) -> Any:
    value = args
    for part in path.split("."):
        if not isinstance(value, dict) or part not in value:
            return _MISSING
        value = value[part]
    return value


def _holds(cond: dict[str, Any], args: Any) -> bool:
    found = _lookup(args, cond["arg"])
    if found is _MISSING:
        return False
    op, value = cond["op"], cond["value"]
    if op in ORDERING:
        if not _number(found):
            return False
        return {
            "<": found < value,
            "<=": found <= value,
            ">": found > value,
            ">=": found >= value,
        }[op]
    if not _scalar(found):
        return False
    # True == 1 in Python; a rule on a number must not match a boolean, nor the reverse.
    same_kind = isinstance(found, bool) == isinstance(value, bool)
    if op == "==":
        return same_kind and found == value
    if op == "!=":
        return not (same_kind and found == value)
    inside = any(isinstance(found, bool) == isinstance(v, bool) and found == v for v in value)
    return inside if op == "in" else not inside


def matches(rule: dict[str, Any], args: Any) -> bool:
    if "all" in rule:
        return all(_holds(c, args) for c in rule["all"])
    return _holds(rule, args)


def rule_text(rule: dict[str, Any]) -> str:
    """A rule as people read it: `amount < 100`, `amount < 100 and currency == "EUR"`."""
    import json

    conds = rule["all"] if "all" in rule else [rule]
    return " and ".join(
        f"{c['arg']} {c['op']} {json.dumps(c['value'], ensure_ascii=False)}" for c in conds
    )


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
    def reason(self) -> str:
        return f"rule {self.key}[{self.index}]: {self.text}"

    def payload(self) -> dict[str, Any]:
        return {"by": "policy", "key": self.key, "index": self.index, "rule": self.text}


def automatic(policy: dict[str, Any], args: Any) -> Automatic | None:
    """The decision the rules take on `args`, or None when a person must decide."""
    for key, approved in (("auto_reject", False), ("auto_approve", True)):
        for i, rule in enumerate(policy.get(key) or []):
            if matches(rule, args):
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
    s: Any, viewer: Viewer, started_by_id: Any = None, approved_by: list[str] | None = None
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


def check(s: Any, user: Any, decision: dict[str, Any], started_by_id: Any) -> None:
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
        "allow": allowed(s),
    }


def viewer_payload(s: Any, viewer: Viewer, started_by_id: Any = None) -> dict[str, Any]:
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
