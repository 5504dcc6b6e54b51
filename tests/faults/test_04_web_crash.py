"""The web process SIGKILLed while decisions commit: every stored decision is resumed."""

import time
from concurrent.futures import ThreadPoolExecutor

from tests.faults.harness import Gateway, wait_until
from tests.faults.history import Answer, Figures, check

RUNS = 60


def test_web_killed_right_after_decisions_commit(gw: Gateway) -> None:
    figures = Figures("web SIGKILL after decisions commit")
    threads = gw.start_threads("pay", RUNS)
    suspended = gw.wait_suspended(threads)
    answers: list[Answer] = []
    broken = []

    def decide(row: tuple) -> None:
        sid, thread, _ = row
        decision = {"approved": True, "reason": "web crash"}
        try:
            status, body = gw.call(
                "POST", f"/api/threads/{thread}/suspensions/{sid}/resume", decision
            )
            answers.append(Answer(sid, status, body, decision))
        except OSError as e:
            broken.append((row, e))

    with ThreadPoolExecutor(24) as pool:
        futures = [pool.submit(decide, row) for row in suspended]
        # Kill the server while decisions are in flight: some have committed and answered,
        # some have committed and not answered, some never reached it.
        wait_until(lambda: len(answers) >= RUNS // 4, 30, "the first decisions", 0.005)
        gw.web.kill()
        killed_at = time.monotonic()
        for f in futures:
            f.result()
    answered = {a.suspension for a in answers if 200 <= a.status < 300}
    gw.web.start()
    back = time.monotonic() - killed_at
    # What the server took and did not answer is resumed like the rest; what it never took,
    # the client sends again (a 202, or a 200 if it had been stored after all).
    for (sid, thread, _), _e in broken:
        decision = {"approved": True, "reason": "web crash"}
        status, body = gw.call("POST", f"/api/threads/{thread}/suspensions/{sid}/resume", decision)
        answers.append(Answer(sid, status, body, decision))
    decided_threads = [t for sid, t, _ in suspended if sid in answered]
    resumed = gw.wait_finished(decided_threads, timeout=60) + back
    gw.wait_finished(threads, timeout=60)
    unexpected = [a for a in answers if a.status not in (200, 202)]
    figures.violations += [f"{a.suspension}: answered {a.status} {a.body}" for a in unexpected]
    figures.faults = 1
    figures.recovery = [back, resumed]
    figures.extra = {
        "answered before the kill": len(answered),
        "cut off": len(broken),
        "recovery": "web back, every 2xx-decided run ended",
    }
    with gw.db() as conn:
        check(conn, figures, threads, answers)
    figures.report()
