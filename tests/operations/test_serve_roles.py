"""`manage.py serve --role ...`: a machine runs the roles it is given; two beat-only machines
share the lease, the second taking it when the first stops; `--proxy-headers` believes
X-Forwarded-For from a trusted proxy only (infra.forwarded.ProxyHeaders)."""

import asyncio
import os
import signal
import subprocess
import sys
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from infra.forwarded import ProxyHeaders, networks
from tests.conftest import ROOT, wait_for
from tests.operations.test_two_machines import _free_port


class Serve:
    def __init__(self, log: Path, env: dict[str, str], *args: str) -> None:
        self.log = log
        self.proc = subprocess.Popen(
            [sys.executable, "manage.py", "serve", *args],
            cwd=ROOT,
            env=env,
            stdout=log.open("w"),
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )

    def text(self) -> str:
        return self.log.read_text(errors="replace")

    def wait_for(self, words: str) -> None:
        wait_for(
            lambda: words in self.text() or self.proc.poll() is not None,
            timeout=180,
            interval=0.5,
            what=f"serve to say {words!r}",
        )
        assert words in self.text(), self.text()[-3000:]

    def stop(self) -> None:
        if self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGINT)
            try:
                self.proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                os.killpg(self.proc.pid, signal.SIGKILL)
                self.proc.wait()


@pytest.fixture
def env(tmp_path: Path) -> dict[str, str]:
    run = uuid.uuid4().hex[:8]
    return {
        **os.environ,
        "GATEWAY_DATA_DIR": str(tmp_path / "data"),
        "GATEWAY_QUEUE": f"roles-{run}",
        "GATEWAY_PREFIX": f"roles{run}",
        "BEAT_LEASE_SECONDS": "2",
        "PYTHONPATH": str(ROOT),
    }


@pytest.fixture
def migrated(env: dict[str, str]) -> Iterator[dict[str, str]]:
    """`env` with a database of its own, migrated: the clock reads the engine's rows."""
    database = None
    if env.get("DATABASE_URL", "").startswith("postgres"):
        import psycopg

        base = env["DATABASE_URL"].rsplit("/", 1)[0]
        database = f"gw_roles_{uuid.uuid4().hex[:8]}"
        with psycopg.connect(f"{base}/postgres", autocommit=True) as conn:
            conn.execute(f"CREATE DATABASE {database}")
        env = {**env, "DATABASE_URL": f"{base}/{database}"}
    manage = [sys.executable, "manage.py", "migrate", "-v0"]
    subprocess.run(manage, cwd=ROOT, env=env, check=True)
    try:
        yield env
    finally:
        if database:
            with psycopg.connect(f"{base}/postgres", autocommit=True) as conn:
                conn.execute(f"DROP DATABASE IF EXISTS {database} WITH (FORCE)")


class ServeRolesTestCase:
    def test_a_second_beat_waits_and_takes_over_when_the_first_stops(self, migrated, tmp_path):
        env = migrated
        first = Serve(tmp_path / "first.log", env, "--role", "beat")
        second = None
        try:
            first.wait_for("Running beat")
            # A deadlines worker with the clock in it: serve's block says so.
            assert "Starting beat..." in first.text()
            assert "beat  the clock: the sweeper" in first.text()
            first.wait_for("beat lease taken by")
            second = Serve(tmp_path / "second.log", env, "--role", "beat")
            second.wait_for("it waits")
            assert "beat lease taken by" not in second.text()
            first.stop()
            assert "beat lease released by" in first.text()
            second.wait_for("beat lease taken by")
        finally:
            first.stop()
            if second is not None:
                second.stop()

    def test_a_web_only_machine_serves_without_workers(self, env, tmp_path) -> None:
        port = _free_port()
        args = ("--role", "web", "--proxy-headers", "--port", str(port))
        web = Serve(tmp_path / "web.log", env, *args)
        try:
            web.wait_for("Serving on")
            said = web.text()
            assert "Starting web..." in said
            assert "worker" not in said.split("Starting ", 1)[1].splitlines()[0]
        finally:
            web.stop()

    def test_a_worker_machine_runs_the_run_workers_and_the_deadlines_worker(
        self, env, tmp_path
    ) -> None:
        # compose.yaml's and the systemd units' worker and deadlines commands, on one machine.
        args = ("--role", "worker", "--concurrency", "2", "--role", "deadlines")
        # WEB_PROCESSES set for the machine's web role changes nothing here.
        workers = Serve(tmp_path / "workers.log", {**env, "WEB_PROCESSES": "2"}, *args)
        try:
            workers.wait_for("Running worker1, worker2, deadlines")
            assert "Serving on" not in workers.text()
        finally:
            workers.stop()


class ProxyHeadersTestCase:
    def _client(self, peer: str, forwarded: bytes) -> tuple[str, int]:
        seen = {}

        async def app(scope, receive, send) -> None:
            seen.update(scope)

        middleware = ProxyHeaders(app, networks(["127.0.0.1"]))
        scope = {
            "type": "http",
            "client": (peer, 5000),
            "headers": [(b"x-forwarded-for", forwarded)],
        }
        asyncio.run(middleware(scope, None, None))
        return seen["client"]

    def test_the_client_is_the_one_the_trusted_proxy_saw(self) -> None:
        assert self._client("127.0.0.1", b"198.51.100.7")[0] == "198.51.100.7"

    def test_a_client_reaching_the_server_directly_cannot_name_another(self) -> None:
        assert self._client("203.0.113.4", b"198.51.100.7") == ("203.0.113.4", 5000)
