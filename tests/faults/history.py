"""The history a scenario produced, read from the database and checked against the invariants.

For the threads a scenario made: every suspension has exactly one terminal status and exactly
one deciding event that agrees with it; an approved gated tool (or one approved at its
deadline) took effect exactly once and a rejected or timed-out-rejected one never; every tool
use has one result; every thread ends, once; and every 2xx answer a client got matches what
was stored. Each scenario prints one line of figures and appends it to the results file.
"""

import json
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import psycopg

ROOT = Path(__file__).resolve().parents[2]
RESULTS = ROOT / "test-artifacts" / "faults-results.jsonl"

DECIDING = {"SUSPENSION_DECIDED", "SUSPENSION_TIMEOUT", "SUSPENSION_CANCELLED"}
# Which deciding event each terminal status must have.
EVENT_FOR = {
    "approved": "SUSPENSION_DECIDED",
    "rejected": "SUSPENSION_DECIDED",
    "timed_out": "SUSPENSION_TIMEOUT",
    "cancelled": "SUSPENSION_CANCELLED",
}
FINAL = {"completed", "failed", "cancelled"}
GATED = {"transfer_funds", "slow_transfer"}


@dataclass
class Answer:
    """What a client was told about a decision it sent."""

    suspension: str
    status: int
    body: Any
    sent: dict[str, Any] = field(default_factory=dict)


@dataclass
class Figures:
    scenario: str
    threads: int = 0
    suspensions: int = 0
    decisions: int = 0  # 2xx answers
    faults: int = 0
    lost: int = 0
    duplicated: int = 0
    recovery: list[float] = field(default_factory=list)
    extra: dict[str, Any] = field(default_factory=dict)
    violations: list[str] = field(default_factory=list)

    def line(self) -> str:
        recovery = " ".join(f"{r:.1f}s" for r in self.recovery) if self.recovery else "-"
        extra = "  ".join(f"{k} {v}" for k, v in self.extra.items())
        return (
            f"{self.scenario}: threads {self.threads}  suspensions {self.suspensions}  "
            f"2xx decisions {self.decisions}  faults injected {self.faults}  "
            f"lost {self.lost}  duplicated {self.duplicated}  recovery {recovery}"
            + (f"  {extra}" if extra else "")
            + (f"  VIOLATIONS {len(self.violations)}" if self.violations else "")
        )

    def report(self) -> None:
        """Print the line, append it to the results file, then fail on any violation."""
        print("\nFIGURES " + self.line())
        RESULTS.parent.mkdir(exist_ok=True)
        with RESULTS.open("a") as f:
            row = {k: v for k, v in self.__dict__.items() if k != "violations"}
            row["violations"] = self.violations[:50]
            row["at"] = time.strftime("%Y-%m-%d %H:%M:%S")
            f.write(json.dumps(row, default=str) + "\n")
        assert not self.violations, f"{len(self.violations)} violation(s):\n" + "\n".join(
            self.violations[:40]
        )


def check(
    conn: psycopg.Connection,
    figures: Figures,
    threads: list[str],
    answers: list[Answer] = (),
    expect_final: bool = True,
    allow_failed: bool = False,
) -> Figures:
    """Check the history of `threads`; violations go into `figures`, counted as lost or
    duplicated where they are one."""
    v = figures.violations
    figures.threads = len(threads)
    suspensions = conn.execute(
        "SELECT id::text, thread_id::text, tool_use_id, tool_name, status, approved, reason,"
        " modified_args, response FROM agents_suspension"
        " WHERE thread_id = ANY(%s::uuid[])",
        (threads,),
    ).fetchall()
    figures.suspensions = len(suspensions)
    deciding = Counter()
    deciding_type: dict[str, set[str]] = {}
    for sid, type_, n in conn.execute(
        "SELECT suspension_id::text, type, count(*) FROM agents_event"
        " WHERE thread_id = ANY(%s::uuid[]) AND type = ANY(%s) GROUP BY 1, 2",
        (threads, list(DECIDING)),
    ):
        deciding[sid] += n
        deciding_type.setdefault(sid, set()).add(type_)
    effects = Counter()
    effect_args: dict[tuple[str, str], Any] = {}
    for thread, tool, args in conn.execute(
        "SELECT thread_id::text, tool, arguments FROM agents_demoaction"
        " WHERE thread_id = ANY(%s::uuid[])",
        (threads,),
    ):
        # One gated call per thread in the suite's agents, so (thread, tool) names the call
        # even where the tool records no idempotency key.
        effects[(thread, tool)] += 1
        effect_args[(thread, tool)] = args
    results = Counter(
        dict(
            conn.execute(
                "SELECT payload->>'tool_use_id', count(*) FROM agents_event"
                " WHERE thread_id = ANY(%s::uuid[]) AND type = 'TOOL_RESULT' GROUP BY 1",
                (threads,),
            ).fetchall()
        )
    )
    stored = {}
    for sid, thread, tool_use, tool, status, approved, reason, modified, response in suspensions:
        stored[sid] = (status, approved, reason, modified, response)
        if status == "pending":
            if expect_final:
                v.append(f"suspension {sid}: still pending")
                figures.lost += 1
            continue
        n = deciding[sid]
        if n != 1:
            v.append(f"suspension {sid} ({status}): {n} deciding events")
            if n > 1:
                figures.duplicated += n - 1
            else:
                figures.lost += 1
        elif deciding_type[sid] != {EVENT_FOR[status]}:
            v.append(f"suspension {sid} ({status}): deciding event {deciding_type[sid]}")
        if tool not in GATED:
            continue
        should_run = status == "approved" or (status == "timed_out" and approved)
        ran = effects[(thread, tool)]
        if should_run and ran == 0 and expect_final:
            v.append(f"suspension {sid} ({status}): the approved {tool} never took effect")
            figures.lost += 1
        elif ran > 1:
            v.append(f"suspension {sid} ({status}): {tool} took effect {ran} times")
            figures.duplicated += ran - 1
        elif not should_run and ran:
            v.append(f"suspension {sid} ({status}, approved={approved}): {tool} ran anyway")
            figures.duplicated += ran
        if should_run and ran == 1 and modified is not None:
            if effect_args[(thread, tool)] != modified:
                v.append(
                    f"suspension {sid}: {tool} ran with {effect_args[(thread, tool)]}, "
                    f"not the approved edit {modified}"
                )
        if results[tool_use] > 1:
            v.append(f"suspension {sid}: {results[tool_use]} TOOL_RESULT events")
            figures.duplicated += results[tool_use] - 1
        elif expect_final and results[tool_use] == 0:
            v.append(f"suspension {sid} ({status}): no TOOL_RESULT")
            figures.lost += 1
    # Statuses first: a thread seen ended has its ending event, committed with it.
    statuses = dict(
        conn.execute(
            "SELECT id::text, status FROM agents_thread WHERE id = ANY(%s::uuid[])", (threads,)
        ).fetchall()
    )
    ended = dict(
        conn.execute(
            "SELECT thread_id::text, count(*) FROM agents_event WHERE thread_id = ANY(%s::uuid[])"
            " AND type IN ('THREAD_COMPLETED', 'THREAD_FAILED', 'THREAD_CANCELLED') GROUP BY 1",
            (threads,),
        ).fetchall()
    )
    errors = dict(
        conn.execute(
            "SELECT id::text, error FROM agents_thread WHERE id = ANY(%s::uuid[])"
            " AND status = 'failed'",
            (threads,),
        ).fetchall()
    )
    for thread in threads:
        status = statuses.get(thread)
        if status is None:
            v.append(f"thread {thread}: missing")
            figures.lost += 1
            continue
        if expect_final and status not in FINAL:
            v.append(f"thread {thread}: still {status}")
            figures.lost += 1
        if status == "failed" and not allow_failed:
            v.append(f"thread {thread}: failed: {errors.get(thread, '')[:200]}")
        if ended.get(thread, 0) > 1:
            v.append(f"thread {thread}: ended {ended[thread]} times")
            figures.duplicated += ended[thread] - 1
        elif status in FINAL and not ended.get(thread):
            v.append(f"thread {thread}: {status} without its event")
    for answer in answers:
        if not 200 <= answer.status < 300:
            continue
        figures.decisions += 1
        row = stored.get(answer.suspension)
        outcome = (answer.body or {}).get("outcome") or {}
        if row is None:
            v.append(f"{answer.status} for unknown suspension {answer.suspension}")
            continue
        status, approved, reason, modified, response = row
        told = (
            outcome.get("status"),
            outcome.get("approved"),
            outcome.get("reason") or "",
            outcome.get("modifiedArgs"),
        )
        if told != (status, approved, reason or "", modified):
            v.append(
                f"suspension {answer.suspension}: answered {answer.status} {told}, "
                f"stored {(status, approved, reason, modified)}"
            )
            if status == "pending":
                figures.lost += 1
        if answer.status == 202 and answer.sent:
            sent = answer.sent
            if (
                outcome.get("approved") != sent.get("approved")
                or (outcome.get("reason") or "") != (sent.get("reason") or "")
                or outcome.get("modifiedArgs") != sent.get("modifiedArgs")
            ):
                v.append(f"suspension {answer.suspension}: 202 for {sent}, but told {told}")
    return figures
