"""Rules over a run's history: counts and sums in a window, and taint from earlier calls.

Where a request is raised (agents.suspending), `assess` reads the policy's rules with what the
gateway already knows of the past:

- A tally (agents.tallies) counts the requests of a tool, or sums one of their arguments, made
  within its window by the same agent, run or requester, **this request included**. Counted are
  the requests approved (by anyone: a rule, a grant, a person) or still waiting; one rejected,
  timed out or cancelled is not, since it never ran. So `count(transfer_funds, 1h) < 5` in
  auto_approve approves the first four calls of the hour and leaves the fifth to a person, and
  `sum(amount, 24h) <= 2000` approves while the day's total, this one's amount with it, stays
  within 2000. A person's edit counts as edited.
- It is atomic: before it counts, `Window` locks a row of its scope (FOR NO KEY UPDATE: the
  agent's definition, the requester's user row, the run's thread) in the transaction that
  raises the request, so of two requests racing for the last unit one counts the other's row.
  The agent's row is locked before a requester's, always, so two raisers cannot cross. On
  SQLite a write transaction is serialized by the database (BEGIN IMMEDIATE).
- Taint: once the run has called a tool marked `reads_untrusted` or `reads_private` (its
  declaration, or an agent file's tool_overrides), a call of one marked `sends_outward` is
  approved by no rule and no grant: it waits for a person, and `needs_person` says why on the
  card. A rule may still reject it: saying no is always safe.
"""

import json
from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any
from uuid import UUID

from django.utils import timezone

from agents import locks, policy
from agents.models import Event, StackFrame, Suspension, Thread
from agents.rules import matches, tallies_of
from agents.runtime.tools import registry
from agents.tallies import compare, limit_text

# What a tally counts: requests that ran, or may still run.
COUNTED = (Suspension.Status.APPROVED, Suspension.Status.PENDING)
READS = {"reads_untrusted": "untrusted content", "reads_private": "private data"}
# A decision that kept a blocking call from running: it read nothing.
NOT_RUN = ("rejected", "timed_out", "cancelled", "responded")
MAX_NAMED = 3


def _number_at(args: Any, path: str) -> float:
    """The number at `path` in `args`; 0 for a missing one or one of another type."""
    value = args
    for part in path.split("."):
        if not isinstance(value, dict) or part not in value:
            return 0.0
        value = value[part]
    plain = isinstance(value, (int, float)) and not isinstance(value, bool)
    return float(value) if plain else 0.0


@dataclass
class Window:
    """The history one request is decided against. `measure` is what agents.rules calls for
    a tally; each tally is measured once (its scope locked first), then remembered."""

    agent_name: str
    tool_name: str
    args: Any
    thread_id: UUID
    requester_id: int | None
    now: datetime
    measured: dict[str, float] = field(default_factory=dict)

    @classmethod
    def of(
        cls, agent_name: str, tool_name: str, args: Any, thread: Thread, now: datetime
    ) -> "Window":
        return cls(agent_name, tool_name, args, thread.pk, thread.created_by_id, now)

    def _scope(self, per: str) -> dict[str, Any]:
        """The requests of the tally's scope, its row locked in the caller's transaction.
        A run nobody started (no requester) is its own requester."""
        if per == "agent" or (per == "requester" and self.requester_id is not None):
            locks.agent(name=self.agent_name)
        if per == "agent":
            return {"agent_name": self.agent_name}
        if per == "requester" and self.requester_id is not None:
            locks.user(self.requester_id)
            return {"thread__created_by_id": self.requester_id}
        locks.threads([self.thread_id])
        return {"thread_id": self.thread_id}

    def measure(self, cond: dict[str, Any]) -> float:
        key = json.dumps(cond, sort_keys=True)
        if key not in self.measured:
            self.measured[key] = self._measure(cond)
        return self.measured[key]

    def _measure(self, cond: dict[str, Any]) -> float:
        tool = cond.get("count") or cond.get("tool") or self.tool_name
        rows = Suspension.objects.filter(
            **self._scope(cond["per"]),
            tool_name=tool,
            status__in=COUNTED,
            created_at__gt=self.now - timedelta(seconds=cond["within"]),
        )
        mine = tool == self.tool_name
        if "count" in cond:
            return float(rows.count() + mine)
        path = cond["sum"]
        total = _number_at(self.args, path) if mine else 0.0
        for given, edited in rows.values_list("tool_input", "modified_args"):
            total += _number_at(edited if edited is not None else given, path)
        return total

    def limits(self, in_force: dict[str, Any]) -> list[str]:
        """Why no auto_approve rule approved, where one would have but for a tally."""
        found = []
        for i, rule in enumerate(in_force.get("auto_approve") or []):
            tallies = tallies_of(rule)
            conds = rule["all"] if "all" in rule else [rule]
            plain = [c for c in conds if c not in tallies]
            if not tallies or (plain and not matches({"all": plain}, self.args)):
                continue
            for cond in tallies:
                n = self.measure(cond)
                if not compare(n, cond["op"], cond["value"]):
                    found.append(limit_text(cond, n, self.tool_name, i))
        return found


# Taint ------------------------------------------------------------------------------------


def readers(thread_id: UUID) -> dict[str, str]:
    """The tools of the run's agents that read untrusted content or private data, by name:
    "reads_untrusted" or "reads_private", as declared (agents.runtime.tools) and as each
    frame's agent file overrides it."""
    found: dict[str, str] = {}
    frames = StackFrame.objects.filter(thread_id=thread_id).values_list("tools", "tool_overrides")
    for names, overrides in frames:
        for name in names or []:
            tool = registry.get(name)
            over = (overrides or {}).get(name) or {}
            for flag in READS:
                if over.get(flag, getattr(tool, flag, False)) is True:
                    found.setdefault(name, flag)
    return found


def taint(thread_id: UUID, tool: Any, now: datetime, buffered: Iterable[Event] = ()) -> list[str]:
    """Why a call of `tool` needs a person: the run read untrusted content or private data
    before it asked to send data out. Empty when `tool` does not send out or nothing was read.
    `buffered`: the step's events not written yet (agents.checkpoints)."""
    if not getattr(tool, "sends_outward", False):
        return []
    flagged = readers(thread_id)
    if not flagged:
        return []
    results = Event.objects.filter(
        thread_id=thread_id, type=Event.Type.TOOL_RESULT, payload__tool__in=sorted(flagged)
    ).order_by("id")
    calls = [(at, p.get("tool"), p.get("decision")) for at, p in _payloads(results)]
    calls += [
        (now, e.payload.get("tool"), e.payload.get("decision"))
        for e in buffered
        if e.type == Event.Type.TOOL_RESULT
    ]
    first: dict[str, tuple[datetime, list[str]]] = {}
    for at, name, decision in calls:
        if name not in flagged or decision in NOT_RUN:
            continue
        when, names = first.setdefault(flagged[name], (at, []))
        if name not in names:
            names.append(name)
    return [
        f"This run read {READS[flag]} ({_names(names)}) at {_clock(when)}, then asked to "
        f"send data out ({tool.name})."
        for flag, (when, names) in sorted(first.items())
    ]


def _payloads(results: Any) -> list[tuple[datetime, dict[str, Any]]]:
    return [
        (at, {"tool": t, "decision": d})
        for at, t, d in results.values_list("created_at", "payload__tool", "payload__decision")
    ]


def _names(names: list[str]) -> str:
    shown = ", ".join(names[:MAX_NAMED])
    return shown + (f" and {len(names) - MAX_NAMED} more" if len(names) > MAX_NAMED else "")


def _clock(at: datetime) -> str:
    local = timezone.localtime(at)
    return (
        f"{local:%H:%M %Z}"
        if local.date() == timezone.localdate()
        else f"{local:%Y-%m-%d %H:%M %Z}"
    )


# Where a request is raised ------------------------------------------------------------------


@dataclass(frozen=True)
class Assessment:
    """What the rules and the run's history make of a request before grants are tried."""

    auto: policy.Automatic | None
    # Sentences for the card: why a person is asked (taint, a limit reached).
    needs_person: list[str]
    # A tainted call: no grant may approve it (agents.grants), nor anything but a person.
    tainted: bool


def assess(
    in_force: dict[str, Any],
    agent_name: str,
    tool: Any,
    args: Any,
    thread: Thread,
    now: datetime,
    buffered: Iterable[Event] = (),
) -> Assessment:
    """The policy's rules on `args` and the run's history, in the caller's transaction (the
    one that raises the request, so a tally's count and the request's row commit together)."""
    tainted = taint(thread.pk, tool, now, buffered)
    window = Window.of(agent_name, tool.name, args, thread, now)
    auto = policy.automatic(in_force, args, window.measure, approve=not tainted)
    if auto is not None:
        return Assessment(auto, [], bool(tainted))
    return Assessment(None, tainted or window.limits(in_force), bool(tainted))
