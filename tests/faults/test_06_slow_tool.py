"""A gated tool slower than the broker's visibility timeout and the task time limits."""

import time

from tests.faults.harness import Gateway
from tests.faults.history import Answer, Figures, check

# The tool outlasts the visibility timeout, the time limits and the lease by this much; once
# the visibility timeout has passed, the suite has the broker put the message back (as kombu
# does by itself, though only every ~100 s with its defaults).
MARGIN = 6


def limits(gw: Gateway) -> dict[str, float]:
    printed = gw.manage(
        "shell",
        "-c",
        "from django.conf import settings as s;"
        "print(s.CELERY_BROKER_TRANSPORT_OPTIONS.get('visibility_timeout') or 0,"
        " getattr(s, 'CELERY_TASK_SOFT_TIME_LIMIT', None) or 0,"
        " getattr(s, 'CELERY_TASK_TIME_LIMIT', None) or 0, s.THREAD_LEASE_SECONDS)",
    )
    visibility, soft, hard, lease = (float(x) for x in printed.splitlines()[-1].split())
    return {"visibility": visibility, "soft": soft, "hard": hard, "lease": lease}


def test_a_tool_slower_than_the_broker_and_the_limits_runs_once(gw: Gateway) -> None:
    figures = Figures("tool slower than visibility timeout")
    found = limits(gw)
    seconds = max(found["visibility"], found["soft"], found["hard"], found["lease"]) + MARGIN
    # One run: the worker's other pool process is free to take a redelivered message.
    threads = gw.start_threads("slow-pay", 1)
    ((sid, thread, _),) = gw.wait_suspended(threads)
    decision = {
        "approved": True,
        "reason": "slow",
        "modifiedArgs": {"amount": 10, "seconds": seconds},
    }
    began = time.monotonic()
    status, body = gw.call("POST", f"/api/threads/{thread}/suspensions/{sid}/resume", decision)
    time.sleep(found["visibility"] + 1.5)
    figures.faults = gw.restore_unacked()
    gw.wait_finished(threads, timeout=seconds + 60)
    took = time.monotonic() - began
    tool_use = gw.sql("SELECT tool_use_id FROM agents_suspension WHERE id = %s", sid)[0][0]
    started = [
        line for line in gw.starts_file.read_text().splitlines() if f"start {tool_use} " in line
    ]
    figures.extra = {
        "tool seconds": seconds,
        "visibility timeout": found["visibility"],
        "time limits": f"soft {found['soft'] or 'none'}, hard {found['hard'] or 'none'}",
        "tool starts": len(started),
        "run took": f"{took:.1f}s",
    }
    if not figures.faults:
        figures.violations.append("the broker put no message back: nothing was injected")
    if len(started) != 1:
        figures.violations.append(f"the slow tool started {len(started)} times: {started}")
    with gw.db() as conn:
        check(conn, figures, threads, [Answer(sid, status, body, decision)])
    figures.report()
