"""Approve versus timeout: a few hundred suspensions decided at their deadline, give or take."""

import random
import time
from concurrent.futures import ThreadPoolExecutor
from datetime import UTC

from tests.faults.harness import Gateway
from tests.faults.history import Answer, Figures, check

RUNS = 120  # per agent: one rejected at its deadline, one approved at it
JITTER = 0.4  # seconds either side of the deadline


def test_decisions_at_the_deadline(gw: Gateway) -> None:
    figures = Figures("approve vs timeout race")
    rng = random.Random(7)
    threads: list[str] = []
    scheduled: set[str] = set()
    futures = []

    def decide(at: float, sid: str, thread: str, decision: dict) -> Answer:
        time.sleep(max(0.0, at - time.time()))
        status, body = gw.call("POST", f"/api/threads/{thread}/suspensions/{sid}/resume", decision)
        return Answer(sid, status, body, decision)

    # Each decision is planned as soon as its suspension exists: runs start over several
    # seconds, so waiting for all of them would let the first deadlines pass unraced.
    with ThreadPoolExecutor(1) as starter, ThreadPoolExecutor(48) as pool:
        started = starter.submit(
            lambda: [
                threads.extend(gw.start_threads(agent, 20))
                for _ in range(RUNS // 20)
                for agent in ("pay-reject", "pay-approve")
            ]
        )
        while not (started.done() and len(scheduled) == 2 * RUNS):
            rows = gw.sql(
                "SELECT id::text, thread_id::text, expires_at FROM agents_suspension"
                " WHERE thread_id = ANY(%s::uuid[])",
                list(threads),
            )
            for sid, thread, expires_at in rows:
                if sid in scheduled:
                    continue
                scheduled.add(sid)
                at = expires_at.replace(tzinfo=UTC).timestamp() + rng.uniform(-JITTER, JITTER)
                decision = {"approved": rng.random() < 0.5, "reason": f"race {len(scheduled)}"}
                futures.append(pool.submit(decide, at, sid, thread, decision))
            if started.done():
                started.result()
            time.sleep(0.2)
        answers = [f.result() for f in futures]
    gw.wait_finished(threads, timeout=90)

    unexpected = [a for a in answers if a.status not in (202, 409)]
    figures.violations += [f"{a.suspension}: answered {a.status} {a.body}" for a in unexpected]
    for a in answers:
        if a.status == 409 and a.body["outcome"]["status"] != "timed_out":
            figures.violations.append(f"{a.suspension}: 409 but {a.body['outcome']}")
    rows = gw.sql(
        "SELECT status, decided_at - expires_at FROM agents_suspension"
        " WHERE thread_id = ANY(%s::uuid[])",
        threads,
    )
    late = []
    for status, delta in rows:
        seconds = delta.total_seconds()
        if status == "timed_out":
            late.append(seconds)
            if seconds < 0:
                figures.violations.append(f"timed out {-seconds:.3f}s before its deadline")
        elif seconds >= 0:
            figures.violations.append(f"{status} {seconds:.3f}s after the deadline")
    with gw.db() as conn:
        check(conn, figures, threads, answers)
    figures.extra = {
        "decided by a person": sum(a.status == 202 for a in answers),
        "timed out": len(late),
        "timeout lateness max": f"{max(late, default=0):.2f}s",
    }
    figures.report()
