"""The rules a policy is made of: its keys, checked where declared, and rules on arguments.

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
  wrong type, does not hold. There is no expression language: nothing is evaluated. A
  condition may also be a count or a sum over the run's history (agents.tallies), read where
  the request is raised (agents.history).
- `allow_accept`, `allow_edit`, `allow_respond`, `allow_ignore`: which decisions a reviewer may
  take besides rejecting (which is always allowed: saying no is always safe), like Agent
  Inbox's flags: approve as asked, approve edited arguments, answer the agent instead of
  deciding (the model gets the answer as the call's result), dismiss from the inbox without
  deciding (the deadline still applies). By default all but respond are allowed. A question
  (an input tool) is always answered in text, whatever allow_respond says.
- `step_up`: approving (as asked or edited) needs a passkey from the approving reviewer at the
  moment of the decision, on the request's page (approvals.stepup); a rejection does not. The
  API, A2A and Slack cannot carry the proof, so their approvals are refused.
- `allow_grants`: false forbids standing grants on the tool (agents.grants): each of its
  requests waits for a person. True by default; a quorum above 1 forbids them too.
- `review`: a reviewing model that recommends or decides the requests left to people
  (agents.reviewing.setting has its keys); null turns off one an outer layer set.

A policy is checked where it is declared: a tool's (agents.runtime.tools.Tool.policy), an agent
file's (agents.agentfiles) and the admin's (agents.admin). agents.policy builds the policy in
force from these layers and decides with it.
"""

import json
from collections.abc import Callable
from typing import Any

from agents.reviewing.setting import ReviewError, check_review
from agents.tallies import TallyError, check_tally, compare, is_tally, tally_text

ALLOW = ("allow_accept", "allow_edit", "allow_respond", "allow_ignore")
KEYS = (
    "groups",
    "four_eyes",
    "quorum",
    "auto_approve",
    "auto_reject",
    *ALLOW,
    "step_up",
    "allow_grants",
    "review",
)
OPS = ("==", "!=", "<", "<=", ">", ">=", "in", "not in")
ORDERING = ("<", "<=", ">", ">=")
MAX_QUORUM = 20
MAX_RULES = 50


class PolicyError(ValueError):
    """A policy that cannot be used; the message names the key."""


def _number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def _scalar(value: Any) -> bool:
    return value is None or isinstance(value, (str, bool, int, float))


def check_condition(cond: Any, where: str) -> dict[str, Any]:
    if is_tally(cond):
        try:
            return check_tally(cond, where)  # a count or a sum over a window (agents.tallies)
        except TallyError as e:
            raise PolicyError(str(e)) from None
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
    for key in ("four_eyes", *ALLOW, "step_up", "allow_grants"):
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
    if "review" in policy:
        try:
            review = policy["review"]
            found["review"] = (
                None if review is None else check_review(review, f"{where}.review", check_rule)
            )
        except ReviewError as e:
            raise PolicyError(str(e)) from e
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


_MISSING = object()


def _lookup(args: Any, path: str) -> Any:
    value = args
    for part in path.split("."):
        if not isinstance(value, dict) or part not in value:
            return _MISSING
        value = value[part]
    return value


# What a tally measures now (agents.history.Window.measure), or None when it cannot be known.
Measure = Callable[[dict[str, Any]], float | None]


def _holds(cond: dict[str, Any], args: Any, measure: Measure | None = None) -> bool:
    if is_tally(cond):
        measured = measure(cond) if measure is not None else None
        return measured is not None and compare(measured, cond["op"], cond["value"])
    found = _lookup(args, cond["arg"])
    if found is _MISSING:
        return False
    op, value = cond["op"], cond["value"]
    if op in ORDERING:
        if not _number(found):
            return False
        return bool(
            {
                "<": found < value,
                "<=": found <= value,
                ">": found > value,
                ">=": found >= value,
            }[op]
        )
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


def matches(rule: dict[str, Any], args: Any, measure: Measure | None = None) -> bool:
    """Does `rule` hold for `args`? Its tallies hold only with a `measure` (where a request is
    raised), and are read after its conditions on the arguments, which cost nothing."""
    conds = rule["all"] if "all" in rule else [rule]
    ordered = sorted(conds, key=is_tally)
    return all(_holds(c, args, measure) for c in ordered)


def tallies_of(rule: dict[str, Any]) -> list[dict[str, Any]]:
    """The rule's conditions over history (agents.tallies)."""
    return [c for c in (rule["all"] if "all" in rule else [rule]) if is_tally(c)]


def condition_text(cond: dict[str, Any]) -> str:
    if is_tally(cond):
        return tally_text(cond)
    return f"{cond['arg']} {cond['op']} {json.dumps(cond['value'], ensure_ascii=False)}"


def rule_text(rule: dict[str, Any]) -> str:
    """A rule as people read it: `amount < 100`, `amount < 100 and currency == "EUR"`."""
    conds = rule["all"] if "all" in rule else [rule]
    return " and ".join(condition_text(c) for c in conds)
