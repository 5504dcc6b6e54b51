"""A person's decision during a backlog of timeouts: how long until the run it resumes runs.

Makes BACKLOG suspended runs whose deadlines fall at the same moment (copies of one run
suspended through the API, written straight into the database: starting 20,000 runs through
the API would take minutes), lets the deadlines fall, and while the sweeper times them out and
their runs resume (each a task on the workers' queue), a person approves a run of their own
every few seconds. Reports, for each approval, the time from the decision's answer to the
resumed run's end (RUN_COMPLETED), and how long the backlog took to drain.
Target: every approval's run ends within 5 s while the backlog drains.

    DATABASE_URL=postgres://root@127.0.0.1:5432/postgres REDIS_URL=redis://127.0.0.1:6379/0 \\
        .venv/bin/python bench/backlog.py --backlog 20000

Starts its own gateway on a fresh database (bench/common.py); talks only to 127.0.0.1.
"""

import argparse
import sqlite3
import subprocess
import time

from common import Gateway, summary

AGENT = """
agents:
  - name: bench
    model: scripted
    tools: [displayConfirmation]
    policy: {four_eyes: false}
    tool_overrides:
      displayConfirmation: {timeout: 3600, on_timeout: reject}
    script:
      - tool_calls:
          - {name: displayConfirmation, input: {action: benchmark}}
      - text: done
"""

# Run in the gateway's environment (manage.py shell): N copies of the template run, each with
# its own thread, frame and pending suspension, all due at DUE (epoch seconds).
CLONE = """
import uuid, datetime
from django.db import transaction
from agents.models import Thread, StackFrame, Suspension
t = Thread.objects.get(pk="{thread}")
f = t.frames.get()
s = t.suspensions.get()
def copy(model, row):
    return model(**{{k: v for k, v in row.__dict__.items() if not k.startswith("_")}})
due = datetime.datetime.fromtimestamp({due}, tz=datetime.timezone.utc)
for start in range(0, {count}, 1000):
    n = min(1000, {count} - start)
    with transaction.atomic():
        threads = []
        for _ in range(n):
            t.pk = uuid.uuid4()
            threads.append(copy(Thread, t))
        Thread.objects.bulk_create(threads)
        frames = []
        for thread in threads:
            f.pk = None
            f.thread_id = thread.pk
            frames.append(copy(StackFrame, f))
        StackFrame.objects.bulk_create(frames)
        suspensions = []
        for frame in frames:
            s.pk = uuid.uuid4()
            s.group = uuid.uuid4()
            s.thread_id = frame.thread_id
            s.frame_id = frame.pk
            s.expires_at = due
            suspensions.append(copy(Suspension, s))
        Suspension.objects.bulk_create(suspensions)
"""


def suspend(gw: Gateway) -> tuple[str, str]:
    """A run started through the API, once it waits: (thread id, suspension id)."""
    thread = gw.call("POST", "/api/threads", {"agent": "bench", "message": "go"})["id"]
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        waiting = gw.call("GET", f"/api/threads/{thread}")["pending_suspensions"]
        if waiting:
            return thread, waiting[0]["id"]
        time.sleep(0.05)
    raise SystemExit(f"run {thread} never waited for a decision")


def counts(gw: Gateway) -> dict[str, int]:
    """Timed-out suspensions and completed runs, read from the database by SQL (a Django
    process per reading would cost the machine more than what is measured)."""
    sql = (
        "SELECT (SELECT count(*) FROM agents_suspension WHERE status = 'timed_out'),"
        " (SELECT count(*) FROM agents_thread WHERE status = 'completed')"
    )
    if gw.database:
        import psycopg

        with psycopg.connect(gw.env["DATABASE_URL"]) as conn:
            row = conn.execute(sql).fetchone()
    else:
        with sqlite3.connect(gw.tmp / "gateway.sqlite3") as conn:
            row = conn.execute(sql).fetchone()
    return {"timed_out": row[0], "completed": row[1]}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--backlog", type=int, default=20000, help="deadlines falling at once")
    parser.add_argument("--every", type=float, default=3, help="seconds between approvals")
    parser.add_argument("--workers", type=int, default=2, help="serve --concurrency")
    args = parser.parse_args()
    with Gateway(AGENT, ["--concurrency", str(args.workers)]) as gw:
        print(f"setup: {gw.setup}, backlog {args.backlog}, {args.workers} workers")
        template, _ = suspend(gw)
        # The person's runs, waiting before the backlog's deadlines fall.
        mine = [suspend(gw) for _ in range(60)]
        due = time.time() + 20
        t0 = time.monotonic()
        subprocess.run(
            [
                *gw.manage,
                "shell",
                "--no-imports",
                "-c",
                CLONE.format(thread=template, due=due, count=args.backlog),
            ],
            env=gw.env,
            check=True,
        )
        print(
            f"{args.backlog} runs copied in {time.monotonic() - t0:.1f} s; due in "
            f"{due - time.time():.1f} s"
        )
        time.sleep(max(0.0, due - time.time()) + 1)
        fell = time.monotonic()
        waits: list[float] = []
        drained = None
        while mine:
            thread, suspension = mine.pop()
            asked = time.monotonic()
            path = f"/api/threads/{thread}/suspensions/{suspension}/resume"
            gw.call("POST", path, {"approved": True})
            decided = time.monotonic()
            while gw.call("GET", f"/api/threads/{thread}")["status"] != "completed":
                if time.monotonic() - decided > 600:
                    raise SystemExit(f"run {thread} did not end within 600 s of its approval")
                time.sleep(0.05)
            waits.append(time.monotonic() - decided)
            now = counts(gw)
            print(
                f"t+{asked - fell:6.1f} s  approval's run ended {waits[-1] * 1000:8.1f} ms after"
                f" the answer; backlog: {now['timed_out']} timed out,"
                f" {now['completed'] - len(waits)} of their runs ended"
            )
            if now["completed"] - len(waits) >= args.backlog:
                drained = time.monotonic() - fell
                break
            time.sleep(max(0.0, asked + args.every - time.monotonic()))
        print(summary("approval → its run ended", waits))
        print(f"over 5 s: {sum(w > 5 for w in waits)} of {len(waits)}")
        print(
            f"backlog drained in {drained:.0f} s"
            if drained
            else "backlog not drained by the last approval"
        )


if __name__ == "__main__":
    main()
