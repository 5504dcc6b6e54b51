"""The inbox's first page with 100,000 pending suspensions, over HTTP.

Fills a fresh database with PENDING pending suspensions (bulk inserts; every other one the
same call, which the inbox shows as one row, approvals.triage), starts daphne, then
times REQUESTS sequential GETs of the first page of the API's pending list (what the inbox
reads) and of the inbox page itself, and prints p50/p95/p99. Talks only to 127.0.0.1.

    DATABASE_URL=postgres://root@127.0.0.1:5432/x .venv/bin/python bench/inbox.py
"""

import argparse
import os
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
import uuid
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def fill(count: int) -> None:
    import django

    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "gateway.settings")
    django.setup()
    from django.db import transaction

    from agents.hashing import canonical_hash
    from agents.models import AgentDefinition, StackFrame, Suspension, Thread

    agent = AgentDefinition.objects.create(name="bench", model="scripted", script=[{"text": "x"}])
    batch = 5000
    with transaction.atomic():
        threads = Thread.objects.bulk_create(
            [Thread(agent=agent, status="suspended") for _ in range(count // 10)]
        )
        frames = StackFrame.objects.bulk_create(
            [StackFrame(thread=t, agent_name="bench", model="scripted") for t in threads]
        )
    for start in range(0, count, batch):
        rows = []
        for i in range(start, min(count, start + batch)):
            frame = frames[i % len(frames)]
            # Half the queue is one runaway call repeated, as in issue 26's 578 of 640.
            args = {"from_account": "A", "to_account": "B", "amount": i if i % 2 else 1}
            rows.append(
                Suspension(
                    thread_id=frame.thread_id,
                    frame=frame,
                    group=uuid.uuid4(),
                    agent_name="bench",
                    lineage="bench",
                    tool_use_id=f"toolu_{i}",
                    tool_name="transfer_funds",
                    tool_input=args,
                    args_hash=canonical_hash(args),
                    prompt="Paying an invoice.",
                    timeout=3600,
                )
            )
        Suspension.objects.bulk_create(rows)


def session_cookie(username: str) -> str:
    """A logged-in browser's cookie for `username`, made as django.contrib.auth.login makes it."""
    from importlib import import_module

    from django.conf import settings
    from django.contrib.auth import BACKEND_SESSION_KEY, HASH_SESSION_KEY, SESSION_KEY
    from django.contrib.auth.models import User

    user = User.objects.get(username=username)
    session = import_module(settings.SESSION_ENGINE).SessionStore()
    session[SESSION_KEY] = str(user.pk)
    session[BACKEND_SESSION_KEY] = settings.AUTHENTICATION_BACKENDS[-1]
    session[HASH_SESSION_KEY] = user.get_session_auth_hash()
    session.save()
    return f"{settings.SESSION_COOKIE_NAME}={session.session_key}"


def timed_get(url: str, headers: dict[str, str]) -> float:
    req = urllib.request.Request(url, headers=headers)
    t0 = time.perf_counter()
    with urllib.request.urlopen(req, timeout=30) as r:
        r.read()
        assert r.status == 200
    return time.perf_counter() - t0


def report(name: str, samples: list[float]) -> None:
    s = sorted(samples)
    p = lambda q: s[min(len(s) - 1, int(len(s) * q))] * 1000  # noqa: E731
    print(f"{name:28} p50 {p(0.5):6.1f} ms  p95 {p(0.95):6.1f} ms  p99 {p(0.99):6.1f} ms")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--pending", type=int, default=100_000)
    parser.add_argument("--requests", type=int, default=200)
    args = parser.parse_args()

    tmp = Path(tempfile.mkdtemp(prefix="gw-bench-"))
    run = uuid.uuid4().hex[:8]
    env = dict(os.environ, GATEWAY_DATA_DIR=str(tmp), PYTHONPATH=str(ROOT), LOG_LEVEL="WARNING")
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
    fill(args.pending)
    print(f"filled {args.pending} pending suspensions in {time.monotonic() - t0:.1f} s")
    if database:
        subprocess.run(["psql", env["DATABASE_URL"], "-qc", "VACUUM ANALYZE"], check=True)
    token = (
        subprocess.run(
            [*manage, "demo_reviewer"], env=env, check=True, capture_output=True, text=True
        )
        .stdout.split("Token:")[1]
        .split()[0]
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
        stderr=(tmp / "daphne.log").open("w"),
        start_new_session=True,
    )
    base = f"http://127.0.0.1:{port}"
    headers = {"Authorization": f"Bearer {token}"}
    try:
        deadline = time.monotonic() + 30
        while True:
            try:
                timed_get(f"{base}/healthz", {})
                break
            except OSError:
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.2)
        url = f"{base}/api/suspensions?status=pending"
        for _ in range(10):
            timed_get(url, headers)
        report("GET /api/suspensions (50)", [timed_get(url, headers) for _ in range(args.requests)])
        # The inbox page itself: its first 100 rows, identical requests grouped, the counts.
        browser = {"Cookie": session_cookie("reviewer")}
        for _ in range(10):
            timed_get(f"{base}/", browser)
        report(
            "GET / (the inbox page)", [timed_get(f"{base}/", browser) for _ in range(args.requests)]
        )
        setup = "PostgreSQL" if database else "SQLite"
        print(f"setup: {setup}; {args.pending} pending; {args.requests} sequential requests")
    except Exception:
        print(f"daphne's log: {tmp / 'daphne.log'}", file=sys.stderr)
        raise
    finally:
        os.killpg(proc.pid, signal.SIGTERM)
        proc.wait(timeout=30)
        if database:
            import psycopg

            with psycopg.connect(f"{server}/postgres", autocommit=True) as conn:
                conn.execute(f"DROP DATABASE IF EXISTS {database} WITH (FORCE)")


if __name__ == "__main__":
    main()
