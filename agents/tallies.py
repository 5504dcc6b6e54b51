"""Conditions over a run's history: counts and sums of earlier requests in a window.

A policy's rule (agents.rules) may hold, beside its conditions on the arguments, a tally:

    {count: transfer_funds, within: 1h, per: agent, op: "<", value: 5}
    {sum: amount, tool: transfer_funds, within: 24h, per: thread, op: "<=", value: 2000}

`count` names a tool; `sum` names an argument (a dotted path, like `arg`) and `tool` the tool
whose calls it adds up (left out: the tool of the request being decided). `within` is a
duration (90s, 10m, 1h, up to 30 days); `per` is `agent` (the default), `thread` (the run) or
`requester` (whoever started the run); `op` compares numbers. What is counted, and the lock
that makes it atomic, is agents.history's. This module is plain data: checked where a policy is
declared, and read as text; nothing is evaluated.
"""

import json
from typing import Any

from agents.runtime.ladder import parse_duration

PER = ("agent", "thread", "requester")
NUMERIC_OPS = ("==", "!=", "<", "<=", ">", ">=")
KINDS = ("count", "sum")
OPTIONAL = {"per", "tool"}


class TallyError(ValueError):
    """A tally that cannot be used; the message names where."""


def is_tally(cond: Any) -> bool:
    return isinstance(cond, dict) and any(k in cond for k in KINDS)


def _number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def _name(value: Any) -> bool:
    return isinstance(value, str) and bool(value) and all(value.split("."))


def check_tally(cond: dict[str, Any], where: str) -> dict[str, Any]:
    """The tally as stored (`within` in seconds, `per` filled in); raises TallyError."""
    kind = "count" if "count" in cond else "sum"
    needed = {kind, "within", "op", "value"}
    allowed = needed | ({"per"} if kind == "count" else OPTIONAL)
    if "count" in cond and "sum" in cond or not needed <= set(cond) or set(cond) - allowed:
        raise TallyError(
            f"{where}: a tally is {{count: tool, within: 1h, per: agent, op: '<', value: 5}} "
            "or {sum: argument, tool: tool, within: 24h, per: thread, op: '<=', value: 2000}"
        )
    if not _name(cond[kind]) or (kind == "count" and "." in cond[kind]):
        what = "a tool's name" if kind == "count" else "an argument, like amount"
        raise TallyError(f"{where}: '{kind}' names {what}")
    if "tool" in cond and (not _name(cond["tool"]) or "." in cond["tool"]):
        raise TallyError(f"{where}: 'tool' names a tool")
    try:
        seconds = parse_duration(cond["within"], f"{where}: 'within'")
    except ValueError as e:
        raise TallyError(str(e)) from None
    per = cond.get("per", "agent")
    if per not in PER:
        raise TallyError(f"{where}: 'per' is one of {', '.join(PER)}, not {per!r}")
    if cond["op"] not in NUMERIC_OPS:
        raise TallyError(f"{where}: 'op' is one of {', '.join(NUMERIC_OPS)} for a {kind}")
    if not _number(cond["value"]):
        raise TallyError(f"{where}: a {kind} compares with a number as 'value'")
    found = {kind: cond[kind], "within": seconds, "per": per}
    if "tool" in cond:
        found["tool"] = cond["tool"]
    return {**found, "op": cond["op"], "value": cond["value"]}


def duration_text(seconds: int) -> str:
    """`1h`, `10m`, `90s`: as an agent file writes it."""
    for unit, size in (("h", 3600), ("m", 60)):
        if seconds % size == 0:
            return f"{seconds // size}{unit}"
    return f"{seconds}s"


def measured_text(cond: dict[str, Any]) -> str:
    """What a tally measures: `count(transfer_funds, 1h, per agent)`."""
    window = f"{duration_text(cond['within'])}, per {cond['per']}"
    if "count" in cond:
        return f"count({cond['count']}, {window})"
    of = f" of {cond['tool']}" if "tool" in cond else ""
    return f"sum({cond['sum']}{of}, {window})"


def tally_text(cond: dict[str, Any]) -> str:
    """A tally as people read it: `count(transfer_funds, 1h, per agent) < 5`."""
    return f"{measured_text(cond)} {cond['op']} {json.dumps(cond['value'])}"


def compare(found: float, op: str, value: float) -> bool:
    return {
        "==": found == value,
        "!=": found != value,
        "<": found < value,
        "<=": found <= value,
        ">": found > value,
        ">=": found >= value,
    }[op]


# Whose requests a tally counts, and its comparison, in a reviewer's words.
WHOSE = {"agent": "this agent", "thread": "this run", "requester": "whoever started this run"}
OP_WORDS = {
    "<": "under",
    "<=": "at most",
    ">": "over",
    ">=": "at least",
    "==": "exactly",
    "!=": "other than",
}


def limit_text(cond: dict[str, Any], found: float, tool: str, index: int) -> str:
    """Why a tally kept rule `auto_approve[index]` from approving, in plain words, the rule
    itself after them: "With this request, this agent has asked for transfer_funds 5 times
    within 1h; the rule (auto_approve[0], count(transfer_funds, 1h, per agent) < 5) approves
    only while that is under 5." `tool` is the request's, for a sum that names none."""
    window = duration_text(cond["within"])
    whose = WHOSE[cond["per"]]
    if "count" in cond:
        said = f"{whose} has asked for {cond['count']} {found:g} times within {window}"
    else:
        of = cond.get("tool", tool)
        said = f"the {cond['sum']} of {of} requests of {whose} within {window} comes to {found:g}"
    limit = f"{OP_WORDS[cond['op']]} {json.dumps(cond['value'])}"
    return (
        f"With this request, {said}; the rule (auto_approve[{index}], {tally_text(cond)}) "
        f"approves only while that is {limit}."
    )
