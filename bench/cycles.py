"""Full approval cycles per second over HTTP: start → suspended → decision → resumed → completed.

Starts daphne, workers and beat on a fresh database (PostgreSQL + Redis when DATABASE_URL and
REDIS_URL are set, else the embedded setup), then runs CLIENTS concurrent client loops for
SECONDS and reports cycles/s and latency percentiles of each step. Bounded in count and time;
talks only to 127.0.0.1.

    .venv/bin/python bench/cycles.py --clients 16 --seconds 20 --workers 2
"""

import argparse
import json
import os
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request
import uuid
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
AGENT = """
agents:
  - name: bench
    model: scripted
    tools: [displayConfirmation]
    script:
      - tool_calls:
          - {name: displayConfirmation, input: {action: benchmark}}
      - text: done
"""


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def call(base: str, token: str, method: str, path: str, body: dict | None = None) -> dict:
    data = json.dumps(body).encode() if body is not None else None
    req = urllib.request.Request(base + path, data=data, method=method)
    req.add_header("Authorization", f"Bearer {token}")
    req.add_header("Content-Type", "application/json")
    with urllib.request.urlopen(req, timeout=30) as r:
        return json.loads(r.read())


def pctl(values: list[float], p: float) -> float:
    values = sorted(values)
    return values[min(len(values) - 1, int(len(values) * p))] * 1000 if values else float("nan")


def client(base: str, token: str, stop: float, out: dict, lock: threading.Lock) -> None:
    while time.monotonic() < stop:
        t0 = time.monotonic()
        thread = call(base, token, "POST", "/api/threads", {"agent": "bench", "message": "go"})[
            "id"
        ]
        while True:
            pending = call(base, token, "GET", f"/api/suspensions?status=pending&thread={thread}")[
                "results"
            ]
            if pending:
                break
            time.sleep(0.01)
        t1 = time.monotonic()
        call(
            base,
            token,
            "POST",
            f"/api/threads/{thread}/suspensions/{pending[0]['id']}/resume",
            {"approved": True},
        )
        while call(base, token, "GET", f"/api/threads/{thread}")["status"] != "completed":
            time.sleep(0.01)
        t2 = time.monotonic()
        with lock:
            out["suspend"].append(t1 - t0)
            out["resume"].append(t2 - t1)
            out["cycle"].append(t2 - t0)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--clients", type=int, default=16)
    parser.add_argument("--seconds", type=float, default=20)
    parser.add_argument("--workers", type=int, default=2, help="worker processes (prefork)")
    args = parser.parse_args()

    tmp = Path(tempfile.mkdtemp(prefix="gw-bench-"))
    run = uuid.uuid4().hex[:8]
    env = dict(
        os.environ,
        GATEWAY_DATA_DIR=str(tmp),
        GATEWAY_QUEUE=f"bench-{run}",
        GATEWAY_PREFIX=f"bench{run}",
        PYTHONPATH=str(ROOT),
        LOG_LEVEL="WARNING",
    )
    database = None
    if os.environ.get("DATABASE_URL"):
        import psycopg

        server = os.environ["DATABASE_URL"].rsplit("/", 1)[0]
        database = f"gw_bench_{run}"
        with psycopg.connect(f"{server}/postgres", autocommit=True) as conn:
            conn.execute(f"CREATE DATABASE {database}")
        env["DATABASE_URL"] = f"{server}/{database}"
    py = sys.executable
    manage = [py, str(ROOT / "manage.py")]
    subprocess.run([*manage, "migrate", "-v0"], env=env, check=True)
    (tmp / "bench.yaml").write_text(AGENT)
    subprocess.run(
        [*manage, "load_agents", str(tmp / "bench.yaml")],
        env=env,
        check=True,
        stdout=subprocess.DEVNULL,
    )
    printed = subprocess.run(
        [*manage, "demo_reviewer"], env=env, check=True, capture_output=True, text=True
    ).stdout
    token = printed.split("Token:")[1].split()[0]
    port = free_port()
    proc = subprocess.Popen(
        [*manage, "serve", "--port", str(port), "--concurrency", str(args.workers)],
        env=env,
        stdout=(tmp / "serve.log").open("w"),
        stderr=subprocess.STDOUT,
        start_new_session=True,
    )
    print(f"server log: {tmp / 'serve.log'}")
    base = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 60
        while True:
            try:
                call(base, token, "GET", "/api/events?after=0&limit=1")
                break
            except OSError:
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.2)
        time.sleep(2)  # let the workers come up
        out: dict[str, list[float]] = {"suspend": [], "resume": [], "cycle": []}
        lock = threading.Lock()
        start = time.monotonic()
        stop = start + args.seconds
        threads = [
            threading.Thread(target=client, args=(base, token, stop, out, lock))
            for _ in range(args.clients)
        ]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        elapsed = time.monotonic() - start
        n = len(out["cycle"])
        setup = "PostgreSQL + Redis" if database else "embedded (SQLite + filesystem broker)"
        print(f"setup: {setup}; clients: {args.clients}; workers: {args.workers}; {elapsed:.1f} s")
        print(f"cycles: {n}  ({n / elapsed:.1f} per second)")
        for step in ("suspend", "resume", "cycle"):
            v = out[step]
            print(
                f"{step:8} p50 {pctl(v, 0.5):7.1f} ms  p95 {pctl(v, 0.95):7.1f} ms  "
                f"p99 {pctl(v, 0.99):7.1f} ms  mean {statistics.mean(v) * 1000 if v else 0:7.1f} ms"
            )
    finally:
        os.killpg(proc.pid, signal.SIGINT)
        proc.wait(timeout=30)
        if database:
            import psycopg

            with psycopg.connect(f"{server}/postgres", autocommit=True) as conn:
                conn.execute(f"DROP DATABASE IF EXISTS {database} WITH (FORCE)")


if __name__ == "__main__":
    main()
