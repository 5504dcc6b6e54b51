"""Two "machines" on this host: two `manage.py serve --role all` process sets, each with its own
data folder, sharing PostgreSQL and Redis. Runs start through both; one machine's clock (in its
deadlines worker) stops mid-way (SIGSTOP: a dead or hung process) and the other's takes the beat
lease over: every deadline is applied once, no run is lost, and the lease's holder is logged and
shown in /readyz and the metrics, never two clocks holding it at once.

Needs DATABASE_URL (PostgreSQL) and REDIS_URL: in CI a missing one is a failure, elsewhere the
test is skipped."""

import json
import os
import re
import signal
import subprocess
import sys
import time
import urllib.error
import urllib.request
import uuid
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import ROOT, wait_for

HERE = Path(__file__).resolve().parent
LEASE_SECONDS = 3
RUNS_PER_MACHINE = 4
METRICS_TOKEN = "two-machines-metrics"


def _services() -> tuple[str, str]:
    database, redis_url = os.environ.get("DATABASE_URL", ""), os.environ.get("REDIS_URL", "")
    if not database.startswith("postgres"):
        # The embedded half of `make test`; its PostgreSQL + Redis half runs this test (and in
        # CI that half fails when either service is missing: the Makefile's test-postgres).
        pytest.skip("two machines share PostgreSQL and Redis: the embedded setup has neither")
    if not redis_url:
        message = "two machines share Redis: set REDIS_URL beside DATABASE_URL"
        if os.environ.get("CI") == "true":
            pytest.fail(message, pytrace=False)
        pytest.skip(message)
    return database, redis_url


def _free_port() -> int:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Machine:
    """One machine's `serve --role all`, with its own data folder and log."""

    def __init__(self, name: str, base: Path, env: dict[str, str]) -> None:
        self.name = name
        self.port = _free_port()
        self.log = base / f"{name}.log"
        self.env = {**env, "GATEWAY_DATA_DIR": str(base / name)}
        self.proc: subprocess.Popen | None = None

    def start(self) -> None:
        self.proc = subprocess.Popen(
            [sys.executable, "manage.py", "serve", "--role", "all", "--port", str(self.port)],
            cwd=ROOT,
            env=self.env,
            stdout=self.log.open("w"),
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )

    def wait_serving(self) -> None:
        wait_for(
            lambda: "Serving on" in self.text() or self.proc.poll() is not None,
            timeout=180,
            interval=0.5,
            what=f"machine {self.name} to serve",
        )
        assert self.proc.poll() is None, self.text()[-5000:]

    def text(self) -> str:
        return self.log.read_text(errors="replace")

    def beat_pid(self) -> int:
        """The process serve started for the beat role (a child of serve): with every role,
        the deadlines worker, whose clock holds or waits for the beat lease."""
        children = subprocess.run(
            ["pgrep", "-P", str(self.proc.pid)], capture_output=True, text=True
        ).stdout.split()
        for pid in children:
            cmdline = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
            if b"deadlines@%h" in cmdline:
                return int(pid)
        raise AssertionError(f"no deadlines worker under machine {self.name}'s serve")

    def get(self, path: str, token: str = "") -> tuple[int, Any]:
        request = urllib.request.Request(f"http://127.0.0.1:{self.port}{path}")
        if token:
            request.add_header("Authorization", f"Bearer {token}")
        try:
            with urllib.request.urlopen(request, timeout=30) as answer:
                body = answer.read().decode()
                return answer.status, json.loads(body) if path != "/metrics" else body
        except urllib.error.HTTPError as e:
            return e.code, json.loads(e.read() or b"null")

    def start_run(self, token: str, i: int) -> str:
        data = json.dumps({"agent": "pay-later", "message": f"run {i} on {self.name}"}).encode()
        request = urllib.request.Request(
            f"http://127.0.0.1:{self.port}/api/threads", data=data, method="POST"
        )
        request.add_header("Authorization", f"Bearer {token}")
        request.add_header("Content-Type", "application/json")
        with urllib.request.urlopen(request, timeout=30) as answer:
            assert answer.status == 201
            return json.loads(answer.read())["id"]

    def stop(self) -> None:
        if self.proc is None or self.proc.poll() is not None:
            return
        for pid in subprocess.run(
            ["pgrep", "-g", str(self.proc.pid)], capture_output=True, text=True
        ).stdout.split():
            os.kill(int(pid), signal.SIGCONT)  # a stopped beat must hear the signal below
        os.killpg(self.proc.pid, signal.SIGINT)
        try:
            self.proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            os.killpg(self.proc.pid, signal.SIGKILL)
            self.proc.wait()


def _taken(text: str) -> list[str]:
    """The holders named by 'beat lease taken by HOLDER' lines, in order."""
    return re.findall(r"beat lease taken by (\S+):", text)


@pytest.fixture
def deployment(tmp_path: Path):
    import psycopg

    database_url, redis_url = _services()
    run = uuid.uuid4().hex[:8]
    base = database_url.rsplit("/", 1)[0]
    database = f"gw_machines_{run}"
    with psycopg.connect(f"{base}/postgres", autocommit=True) as conn:
        conn.execute(f"CREATE DATABASE {database}")
    env = {
        key: value
        for key, value in os.environ.items()
        if not key.startswith(("GATEWAY_", "DATABASE_", "REDIS_", "CELERY_", "DEADLINE_"))
    }
    env.update(
        DATABASE_URL=f"{base}/{database}",
        REDIS_URL=redis_url,
        # One deployment: the same queues and channel prefix on both machines.
        GATEWAY_QUEUE=f"machines-{run}",
        GATEWAY_PREFIX=f"machines{run}",
        BEAT_LEASE_SECONDS=str(LEASE_SECONDS),
        WORKER_CONCURRENCY="1",
        METRICS_TOKEN=METRICS_TOKEN,
        PYTHONPATH=str(ROOT),
        # The same SECRET_KEY on every machine (docs/operations.md): the receipts' signing
        # key is sealed under it in the shared database, and each machine signs decisions.
        SECRET_KEY=f"two-machines-{run}-{os.urandom(16).hex()}",
    )
    manage = [sys.executable, "manage.py"]
    setup_env = {**env, "GATEWAY_DATA_DIR": str(tmp_path / "setup")}
    for args in (["migrate", "-v0"], ["load_agents", str(HERE / "agents.yaml")]):
        subprocess.run([*manage, *args], cwd=ROOT, env=setup_env, check=True)
    printed = subprocess.run(
        [*manage, "demo_reviewer", "--username", "ops-agent"],
        cwd=ROOT,
        env=setup_env,
        check=True,
        capture_output=True,
        text=True,
    ).stdout
    token = printed.split("Token:")[1].split()[0]
    machines = [Machine("a", tmp_path, env), Machine("b", tmp_path, env)]
    try:
        yield machines, token, env["DATABASE_URL"]
    finally:
        for machine in machines:
            machine.stop()
        time.sleep(0.5)
        with psycopg.connect(f"{base}/postgres", autocommit=True) as conn:
            conn.execute(f"DROP DATABASE IF EXISTS {database} WITH (FORCE)")


class TwoMachinesTestCase:
    def test_the_other_beat_takes_over_and_every_deadline_is_applied_once(self, deployment) -> None:
        import psycopg

        (a, b), token, database_url = deployment
        a.start()
        a.wait_serving()
        a_beat = a.beat_pid()
        a_name = wait_for(lambda: _taken(a.text()), timeout=30, what="a's beat to take the lease")
        assert a_name[0].endswith(f":{a_beat}"), a.text()[-3000:]
        b.start()
        b.wait_serving()
        # B's beat waits: the lease is A's, and both machines say so.
        wait_for(lambda: "it waits" in b.text(), timeout=30, what="b's beat to wait")
        assert _taken(b.text()) == []
        for machine in (a, b):
            status, ready = wait_for(
                lambda m=machine: (r := m.get("/readyz"))[0] == 200 and r,
                timeout=30,
                what=f"{machine.name} to be ready",
            )
            assert ready["beat_lease_holder"].endswith(f":{a_beat}"), ready
        _, scraped = b.get("/metrics", METRICS_TOKEN)
        assert f'gateway_beat_lease_held{{holder="{ready["beat_lease_holder"]}"}} 1.0' in scraped
        assert "gateway_sweeper_last_run_timestamp_seconds " in scraped

        threads = [m.start_run(token, i) for m in (a, b) for i in range(RUNS_PER_MACHINE)]

        def sql(query: str, *params: Any) -> list[tuple]:
            with psycopg.connect(database_url, autocommit=True) as conn:
                return conn.execute(query, params).fetchall()

        wait_for(
            lambda: (
                sql(
                    "SELECT count(*) FROM agents_suspension WHERE thread_id = ANY(%s::uuid[]) "
                    "AND status = 'pending'",
                    threads,
                )[0][0]
                == len(threads)
            ),
            timeout=120,
            interval=0.5,
            what="every run to wait for its deadline",
        )
        # A's beat stops mid-way, its lease unrenewed; the deadlines fall after that.
        os.kill(a_beat, signal.SIGSTOP)
        stopped = time.time()
        wait_for(lambda: _taken(b.text()), timeout=4 * LEASE_SECONDS + 30, what="b to take over")
        b_beat = b.beat_pid()
        assert _taken(b.text())[0].endswith(f":{b_beat}")
        assert time.time() - stopped >= LEASE_SECONDS - 0.5  # not before A's lease ran out
        status, ready = a.get("/readyz")
        assert ready["beat_lease_holder"].endswith(f":{b_beat}"), ready

        wait_for(
            lambda: (
                sql(
                    "SELECT count(*) FROM agents_thread WHERE id = ANY(%s::uuid[]) "
                    "AND status IN ('completed', 'failed', 'cancelled')",
                    threads,
                )[0][0]
                == len(threads)
            ),
            timeout=120,
            interval=0.5,
            what="every run to finish after its deadline",
        )
        # Every deadline applied once: one timeout event per request, all rejected by it.
        timeouts = sql(
            "SELECT suspension_id, count(*) FROM agents_event WHERE type = 'SUSPENSION_TIMEOUT' "
            "AND thread_id = ANY(%s::uuid[]) GROUP BY suspension_id",
            threads,
        )
        assert len(timeouts) == len(threads) and {n for _, n in timeouts} == {1}, timeouts
        assert sql(
            "SELECT status, count(*) FROM agents_suspension WHERE thread_id = ANY(%s::uuid[]) "
            "GROUP BY status",
            threads,
        ) == [("timed_out", len(threads))]
        assert sql(
            "SELECT status, count(*) FROM agents_thread WHERE id = ANY(%s::uuid[]) GROUP BY status",
            threads,
        ) == [("completed", len(threads))]

        # A's beat, back, finds the lease gone and waits: never two holders at once.
        os.kill(a_beat, signal.SIGCONT)
        wait_for(
            lambda: "it waits" in a.text(),
            timeout=30,
            what="a's beat to find it lost the lease",
        )
        assert len(_taken(a.text())) == 1 and len(_taken(b.text())) == 1
