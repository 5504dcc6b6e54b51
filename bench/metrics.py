"""What a Prometheus scrape and the conversation summary cost on a full database, over HTTP.

Fills a fresh database with SUSPENSIONS suspensions (most decided, some pending, raised over the
last 30 days), WAITS waits for a message (INPUT_REQUIRED, most answered by an INPUT_PROVIDED)
and EVENTS other events, starts daphne with a METRICS_TOKEN, then times REQUESTS sequential
GET /metrics and GET /api/metrics/conversations?window=24h and prints p50/p95/p99. Talks only
to 127.0.0.1.

    DATABASE_URL=postgres://root@127.0.0.1:5432/x .venv/bin/python bench/metrics.py
"""

import argparse
import os
import random
import signal
import subprocess
import sys
import tempfile
import time
import uuid
from datetime import timedelta
from pathlib import Path

from inbox import ROOT, free_port, report, timed_get

TOKEN = "bench-metrics-token"


def fill(suspensions: int, waits: int, others: int) -> None:
    import django

    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "gateway.settings")
    django.setup()
    from django.db import transaction
    from django.utils import timezone

    from agents.models import AgentDefinition, Event, StackFrame, Suspension, Thread

    # The rows are written as they would have been over a month: their own created_at.
    for model in (Suspension, Event):
        model._meta.get_field("created_at").auto_now_add = False
    rng = random.Random(7)
    now = timezone.now()
    agents = [f"agent{i}" for i in range(8)]
    tools = ["transfer_funds", "delete_records", "ask_user"]
    definitions = [AgentDefinition.objects.create(name=a, model="scripted") for a in agents]
    count = max(suspensions // 10, waits, 1)
    with transaction.atomic():
        threads = Thread.objects.bulk_create(
            [Thread(agent=rng.choice(definitions), status="completed") for _ in range(count)]
        )
        frames = StackFrame.objects.bulk_create(
            [StackFrame(thread=t, agent_name=t.agent.name, model="scripted") for t in threads]
        )
    batch = 5000
    for start in range(0, suspensions, batch):
        rows = []
        for i in range(start, min(suspensions, start + batch)):
            frame = frames[i % len(frames)]
            raised = now - timedelta(days=rng.uniform(0, 30))
            roll = rng.random()
            status = (
                "pending"
                if roll < 0.02
                else "timed_out"
                if roll < 0.08
                else "cancelled"
                if roll < 0.1
                else "rejected"
                if roll < 0.3
                else "approved"
            )
            decided = (
                None if status == "pending" else raised + timedelta(seconds=rng.expovariate(1 / 60))
            )
            tool = rng.choice(tools)
            rows.append(
                Suspension(
                    thread_id=frame.thread_id,
                    frame=frame,
                    group=uuid.uuid4(),
                    agent_name=frame.agent_name,
                    tool_use_id=f"toolu_{i}",
                    tool_name=tool,
                    kind="input" if tool == "ask_user" else "confirmation",
                    status=status,
                    created_at=raised,
                    decided_at=decided,
                    resumed_at=decided + timedelta(seconds=rng.uniform(0.01, 0.5))
                    if decided
                    else None,
                )
            )
        Suspension.objects.bulk_create(rows)
    rows = []
    for i in range(waits):
        thread = threads[i]
        raised = now - timedelta(days=rng.uniform(0, 30))
        rows.append(
            Event(
                thread=thread,
                type="INPUT_REQUIRED",
                payload={"agent": thread.agent.name},
                created_at=raised,
            )
        )
        if rng.random() < 0.9:
            rows.append(
                Event(
                    thread=thread,
                    type="INPUT_PROVIDED",
                    created_at=raised + timedelta(seconds=rng.expovariate(1 / 90)),
                )
            )
        if len(rows) >= batch:
            Event.objects.bulk_create(rows)
            rows = []
    Event.objects.bulk_create(rows)
    types = ["AGENT_MESSAGE", "TOOL_CALLED", "TOOL_RESULT", "AGENT_SUSPENDED", "AGENT_RESUMED"]
    for start in range(0, others, batch):
        Event.objects.bulk_create(
            [
                Event(
                    thread=threads[i % len(threads)],
                    type=rng.choice(types),
                    payload={"text": "x" * 40},
                    created_at=now - timedelta(days=rng.uniform(0, 30)),
                )
                for i in range(start, min(others, start + batch))
            ]
        )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--suspensions", type=int, default=100_000)
    parser.add_argument("--waits", type=int, default=10_000)
    parser.add_argument("--events", type=int, default=500_000)
    parser.add_argument("--requests", type=int, default=50)
    args = parser.parse_args()

    tmp = Path(tempfile.mkdtemp(prefix="gw-bench-"))
    run = uuid.uuid4().hex[:8]
    env = dict(
        os.environ,
        GATEWAY_DATA_DIR=str(tmp),
        PYTHONPATH=str(ROOT),
        LOG_LEVEL="WARNING",
        METRICS_TOKEN=TOKEN,
    )
    database = None
    if os.environ.get("DATABASE_URL"):
        import psycopg

        server = os.environ["DATABASE_URL"].rsplit("/", 1)[0]
        database = f"gw_bench_{run}"
        with psycopg.connect(f"{server}/postgres", autocommit=True) as conn:
            conn.execute(f"CREATE DATABASE {database}")
        env["DATABASE_URL"] = f"{server}/{database}"
    os.environ.update(env)
    manage = [sys.executable, str(ROOT / "manage.py")]
    subprocess.run([*manage, "migrate", "-v0"], env=env, check=True)
    t0 = time.monotonic()
    fill(args.suspensions, args.waits, args.events)
    print(
        f"filled {args.suspensions} suspensions, {args.waits} waits and {args.events} other "
        f"events in {time.monotonic() - t0:.1f} s"
    )
    if database:
        subprocess.run(["psql", env["DATABASE_URL"], "-qc", "VACUUM ANALYZE"], check=True)
    subprocess.run([*manage, "demo_admin"], env=env, check=True, capture_output=True)
    staff = (
        subprocess.run(
            [*manage, "create_api_token", "admin"],
            env=env,
            check=True,
            capture_output=True,
            text=True,
        )
        .stdout.strip()
        .split()[-1]
    )
    port = free_port()
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "daphne",
            "-b",
            "127.0.0.1",
            "-p",
            str(port),
            "gateway.asgi:application",
        ],
        env=env,
        cwd=ROOT,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
    )
    base = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 60
        while True:
            try:
                timed_get(f"{base}/healthz", {})
                break
            except OSError:
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.2)
        for name, url, headers in [
            ("GET /metrics", f"{base}/metrics", {"Authorization": f"Bearer {TOKEN}"}),
            (
                "GET conversations?window=24h",
                f"{base}/api/metrics/conversations?window=24h",
                {"Authorization": f"Bearer {staff}"},
            ),
            (
                "GET conversations?window=7d",
                f"{base}/api/metrics/conversations?window=7d",
                {"Authorization": f"Bearer {staff}"},
            ),
        ]:
            for _ in range(3):
                timed_get(url, headers)
            report(name, [timed_get(url, headers) for _ in range(args.requests)])
        setup = "PostgreSQL" if database else "SQLite"
        print(f"setup: {setup}; {args.requests} sequential requests each")
    finally:
        os.killpg(proc.pid, signal.SIGTERM)
        try:
            proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
        if database:
            import psycopg

            with psycopg.connect(f"{server}/postgres", autocommit=True) as conn:
                conn.execute(f"DROP DATABASE IF EXISTS {database} WITH (FORCE)")


if __name__ == "__main__":
    main()
