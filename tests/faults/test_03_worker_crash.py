"""A worker SIGKILLed, then one SIGTERMed, while it resumes threads; restarted, all finish."""

import time
from concurrent.futures import ThreadPoolExecutor

from tests.faults.harness import Gateway, wait_until
from tests.faults.history import Answer, Figures, check

SLOW = 8  # runs whose gated tool takes SECONDS: a worker is killed in the middle of them
FAST = 30  # runs with the quick transfer, resumed in a burst
SECONDS = 3


def approve_all(gw: Gateway, suspended: list[tuple]) -> list[Answer]:
    def one(row: tuple) -> Answer:
        sid, thread, _ = row
        decision = {"approved": True, "reason": "crash test"}
        status, body = gw.call("POST", f"/api/threads/{thread}/suspensions/{sid}/resume", decision)
        return Answer(sid, status, body, decision)

    with ThreadPoolExecutor(8) as pool:
        return list(pool.map(one, suspended))


def starts(gw: Gateway, tool_uses: set[str]) -> dict[str, list[float]]:
    """When each of these calls started (wall clock), every time it did."""
    times: dict[str, list[float]] = {k: [] for k in tool_uses}
    for line in gw.starts_file.read_text().splitlines():
        parts = line.split()
        if parts[0] == "start" and parts[1] in times:
            times[parts[1]].append(float(parts[3]))
    return times


def crash(gw: Gateway, how: str) -> tuple[list[str], list[Answer], list[float], dict[str, int]]:
    """Start runs, approve them, hit the run worker with `how` once tools are running,
    restart it. Returns the threads, the answers, the recovery times (until a call cut short
    started again, until every run ended) and how often each slow call started."""
    threads = gw.start_threads("slow-pay", SLOW) + gw.start_threads("pay", FAST)
    suspended = gw.wait_suspended(threads)
    tool_uses = {
        r[0]
        for r in gw.sql(
            "SELECT tool_use_id FROM agents_suspension WHERE thread_id = ANY(%s::uuid[])"
            " AND tool_name = 'slow_transfer'",
            threads,
        )
    }
    answers = approve_all(gw, suspended)
    wait_until(
        lambda: sum(map(len, starts(gw, tool_uses).values())) >= 2,
        30,
        "the slow tools to start",
        0.05,
    )
    killed_at, killed_wall = time.monotonic(), time.time()
    if how == "SIGKILL":
        gw.worker.kill()
    else:
        gw.worker.terminate(timeout=60)
    gw.worker.start()
    gw.wait_finished(threads, timeout=120)
    ended = time.monotonic() - killed_at
    times = starts(gw, tool_uses)
    again = [t[1] - killed_wall for t in times.values() if len(t) > 1 and t[0] < killed_wall]
    recovery = [max(again)] if again else []
    return threads, answers, [*recovery, ended], {k: len(t) for k, t in times.items()}


def test_worker_killed_mid_resume(gw: Gateway) -> None:
    figures = Figures("worker SIGKILL mid-resume")
    threads, answers, recovery, counts = crash(gw, "SIGKILL")
    figures.faults = 1
    figures.recovery = recovery
    figures.extra = {
        "slow tool starts": sum(counts.values()),
        "slow calls started again": sum(n - 1 for n in counts.values() if n > 1),
        "recovery": "until the cut calls ran again, until every run ended",
    }
    with gw.db() as conn:
        check(conn, figures, threads, answers)
    if any(n == 0 for n in counts.values()):
        figures.violations.append(f"a slow tool never started: {counts}")
    figures.report()


def test_worker_terminated_mid_resume(gw: Gateway) -> None:
    figures = Figures("worker SIGTERM mid-resume")
    threads, answers, recovery, counts = crash(gw, "SIGTERM")
    figures.faults = 1
    figures.recovery = recovery
    figures.extra = {"slow tool starts": sum(counts.values()), "recovery": "until every run ended"}
    with gw.db() as conn:
        check(conn, figures, threads, answers)
    # A warm shutdown lets the running tools finish: none is started twice.
    again = {k: n for k, n in counts.items() if n != 1}
    if again:
        figures.violations.append(f"after a SIGTERM, tools started {again} times")
    figures.report()
