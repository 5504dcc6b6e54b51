"""The fault suite's own gateway: a PostgreSQL cluster, a Redis server and every process.

Each piece is a separate OS process the suite may kill, stop or restart: PostgreSQL (its own
cluster on a free port, made by initdb), redis-server (a free port, persistence off or on),
daphne, the run worker, and the deadline worker with the clock. The processes get the gateway's
settings through the environment, as in production.
"""

import contextlib
import json
import os
import pwd
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
import urllib.error
import urllib.request
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

import psycopg

ROOT = Path(__file__).resolve().parents[2]
HERE = Path(__file__).resolve().parent


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_until(
    predicate: Callable[[], Any], timeout: float, what: str, interval: float = 0.1
) -> Any:
    deadline = time.monotonic() + timeout
    while True:
        value = predicate()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout:.0f}s waiting for {what}")
        time.sleep(interval)


def postgres_bin() -> Path | None:
    """The newest PostgreSQL server's bin folder, or None."""
    found = sorted(Path("/usr/lib/postgresql").glob("*/bin/initdb"), key=lambda p: int(p.parts[-3]))
    if found:
        return found[-1].parent
    initdb = shutil.which("initdb")
    return Path(initdb).parent if initdb else None


def missing_services() -> list[str]:
    missing = []
    if postgres_bin() is None:
        missing.append("initdb (PostgreSQL server)")
    if shutil.which("redis-server") is None:
        missing.append("redis-server")
    return missing


class Postgres:
    """A cluster of the suite's own; initdb refuses root, so it runs as the postgres user."""

    def __init__(self, base: Path) -> None:
        self.bin = postgres_bin()
        self.port = free_port()
        self.data = base / "pgdata"
        self.sockets = base / "pgsock"
        self.log = base / "postgres.log"
        self.user = "postgres" if os.getuid() == 0 else None
        self.url = f"postgres://postgres@127.0.0.1:{self.port}"

    def _run(self, *args: str, check: bool = True) -> subprocess.CompletedProcess:
        command = [str(a) for a in args]
        if self.user:
            command = ["runuser", "-u", self.user, "--", *command]
        return subprocess.run(command, check=check, capture_output=True, text=True)

    def init(self) -> None:
        for path in (self.data, self.sockets):
            path.mkdir(parents=True)
            if self.user:
                entry = pwd.getpwnam(self.user)
                os.chown(path, entry.pw_uid, entry.pw_gid)
        self.log.touch()
        if self.user:
            entry = pwd.getpwnam(self.user)
            os.chown(self.log, entry.pw_uid, entry.pw_gid)
            # runuser keeps the caller's folder; the parents must be traversable.
            for parent in self.data.parents:
                if str(parent).startswith(tempfile.gettempdir() + "/"):
                    parent.chmod(parent.stat().st_mode | 0o711)
        self._run(
            self.bin / "initdb",
            "-D",
            self.data,
            "-U",
            "postgres",
            "--auth=trust",
            "-E",
            "UTF8",
            "--no-sync",
        )
        # fsync off: the machine never crashes here, only PostgreSQL does. synchronous_commit
        # stays on, so a commit a client was told about survives an immediate stop.
        conf = (
            f"port = {self.port}\nlisten_addresses = '127.0.0.1'\n"
            f"unix_socket_directories = '{self.sockets}'\nfsync = off\n"
            "max_connections = 300\n"
            "shared_buffers = 128MB\n"
        )
        with (self.data / "postgresql.conf").open("a") as f:
            f.write(conf)

    def start(self) -> None:
        self._run(self.bin / "pg_ctl", "-D", self.data, "-l", self.log, "-w", "-t", "60", "start")

    def stop(self, mode: str = "fast") -> None:
        """`fast` disconnects clients and shuts down cleanly; `immediate` is a crash."""
        self._run(self.bin / "pg_ctl", "-D", self.data, "-m", mode, "-w", "stop", check=False)

    def running(self) -> bool:
        done = self._run(self.bin / "pg_ctl", "-D", self.data, "status", check=False)
        return done.returncode == 0

    def admin(self, sql: str) -> None:
        with psycopg.connect(f"{self.url}/postgres", autocommit=True) as conn:
            conn.execute(sql)


class Redis:
    """redis-server on a free port: persistence off (nothing survives a restart) or on
    (append-only file, fsync on every write)."""

    def __init__(self, base: Path) -> None:
        self.port = free_port()
        self.dir = base / "redis"
        self.dir.mkdir()
        self.url = f"redis://127.0.0.1:{self.port}/0"
        self.proc: subprocess.Popen | None = None
        self.persistent = False
        self.starts = 0

    def start(self, persistent: bool | None = None) -> None:
        if persistent is not None:
            self.persistent = persistent
        durability = (
            ["--appendonly", "yes", "--appendfsync", "always"]
            if self.persistent
            else ["--appendonly", "no"]
        )
        self.starts += 1
        self.proc = subprocess.Popen(
            [
                "redis-server",
                "--port",
                str(self.port),
                "--bind",
                "127.0.0.1",
                "--save",
                "",
                "--dir",
                str(self.dir),
                *durability,
            ],
            stdout=(self.dir / f"redis-{self.starts}.log").open("w"),
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
        import redis

        client = redis.Redis.from_url(self.url, socket_timeout=1)

        def up() -> bool:
            try:
                return bool(client.ping())
            except redis.RedisError:
                return False

        wait_until(up, 20, "redis-server to answer")

    def stop(self, sig: int = signal.SIGKILL) -> None:
        if self.proc and self.proc.poll() is None:
            self.proc.send_signal(sig)
            self.proc.wait(timeout=20)

    def wipe(self) -> None:
        """Forget the append-only file (between scenarios that want different durability)."""
        for path in self.dir.iterdir():
            if path.name.startswith("append") or path.suffix in (".aof", ".rdb"):
                if path.is_dir():
                    shutil.rmtree(path)
                else:
                    path.unlink()


class Process:
    """One of the gateway's processes; killed or stopped by signal, started again."""

    def __init__(
        self, name: str, command: list[str], env: dict[str, str], logs: Path, ready: str
    ) -> None:
        self.name = name
        self.command = command
        self.env = env
        self.logs = logs
        self.ready = ready
        self.proc: subprocess.Popen | None = None
        self.starts = 0
        # Whether the process should be running: a supervisor (Gateway.supervise, as systemd's
        # Restart=always in production) starts it again when it exits by itself; a kill or
        # stop by the test clears it, so a fault the test injects is not undone behind it.
        self.wanted = False
        self.restarts = 0
        self.lock = threading.RLock()

    @property
    def log(self) -> Path:
        return self.logs / f"{self.name}-{self.starts}.log"

    @property
    def pid(self) -> int:
        assert self.proc is not None
        return self.proc.pid

    def alive(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def start(self, wait: bool = True) -> None:
        with self.lock:
            self.wanted = True
            self.starts += 1
            self.proc = subprocess.Popen(
                self.command,
                cwd=ROOT,
                env=self.env,
                stdout=self.log.open("w"),
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )
        if wait:
            self.wait_ready()

    def wait_ready(self, timeout: float = 60) -> None:
        log = self.log

        def ready() -> bool:
            if self.proc.poll() is not None:
                raise RuntimeError(f"{self.name} exited:\n{log.read_text()[-3000:]}")
            return self.ready in log.read_text(errors="replace")

        wait_until(ready, timeout, f"{self.name} to start ({log})")

    def signal(self, sig: int) -> None:
        """Signal the process group: a Celery worker's pool children die with it."""
        if self.alive():
            with contextlib.suppress(ProcessLookupError):
                os.killpg(self.proc.pid, sig)

    def supervise(self) -> bool:
        """Start the process again if it exited by itself; whether it did."""
        with self.lock:
            if not self.wanted or self.proc is None or self.proc.poll() is None:
                return False
            self.restarts += 1
            self.start(wait=False)
            return True

    def kill(self) -> None:
        with self.lock:
            self.wanted = False
        self.signal(signal.SIGKILL)
        self.proc.wait(timeout=30)

    def terminate(self, timeout: float = 60) -> None:
        with self.lock:
            self.wanted = False
        if not self.alive():
            return
        # SIGTERM to the main process only: a Celery worker's warm shutdown finishes the
        # tasks its pool is running, then exits.
        self.proc.send_signal(signal.SIGTERM)
        try:
            self.proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            self.kill()
        self.signal(signal.SIGKILL)  # pool children left behind, if any

    def restart(self) -> None:
        self.terminate()
        self.start()


class Gateway:
    """PostgreSQL, Redis, daphne, two workers (one has the clock), with the suite's timings."""

    def __init__(self) -> None:
        self.base = Path(tempfile.mkdtemp(prefix="gw-faults-"))
        self.base.chmod(0o755)
        self.logs = self.base / "logs"
        self.logs.mkdir()
        self.pg = Postgres(self.base)
        self.redis = Redis(self.base)
        run = uuid.uuid4().hex[:8]
        self.database = f"gw_faults_{run}"
        self.queue = f"faults-{run}"
        self.web_port = free_port()
        self.base_url = f"http://127.0.0.1:{self.web_port}"
        self.ws_url = f"ws://127.0.0.1:{self.web_port}/ws/events/"
        self.env = {
            key: value
            for key, value in os.environ.items()
            if not key.startswith(("GATEWAY_", "DATABASE_", "REDIS_", "CELERY_", "DEADLINE_"))
        }
        self.env.update(
            DATABASE_URL=f"{self.pg.url}/{self.database}",
            REDIS_URL=self.redis.url,
            GATEWAY_DATA_DIR=str(self.base / "data"),
            GATEWAY_QUEUE=self.queue,
            GATEWAY_PREFIX=f"faults{run}",
            PYTHONPATH=str(ROOT),
            DJANGO_SETTINGS_MODULE="gateway.settings",
            LOG_LEVEL="INFO",
            THREAD_LEASE_SECONDS="4",
            STALLED_AFTER_SECONDS="2",
            SWEEP_INTERVAL_SECONDS="1",
            BROKER_VISIBILITY_TIMEOUT=os.environ.get("FAULTS_VISIBILITY_TIMEOUT", "6"),
            DATABASE_POOL_SIZE="24",
            TOOL_MODULES="tests.faults.slow_tools",
            FAULTS_STARTS_FILE=str(self.base / "tool-starts.log"),
            # The scenarios send hundreds of runs and decisions a minute from one token, and
            # one of them holds 20,000 pending requests: the limits on abuse are not what they
            # test (tests/approvals/test_rate_limits.py does), so they are off here.
            RATE_LIMIT_RUNS="",
            RATE_LIMIT_USER_RUNS="",
            RATE_LIMIT_DECISIONS="",
            RATE_LIMIT_USER_DECISIONS="",
            MAX_PENDING_PER_AGENT="0",
        )
        self.starts_file = self.base / "tool-starts.log"
        self.starts_file.touch()
        py = sys.executable
        celery = [py, "-m", "celery", "-A", "gateway"]
        worker = [*celery, "worker", "-l", "info", "--without-gossip", "--without-mingle"]
        self.web = Process(
            "web",
            [py, "-m", "daphne", "-b", "127.0.0.1", "-p", str(self.web_port)]
            + ["gateway.asgi:application"],
            self.env,
            self.logs,
            "Listening on TCP address",
        )
        self.worker = Process(
            "worker",
            # Under the default pool (solo: what `make run` runs, one run worker per step) it
            # runs one step at a time; -c says two for the others.
            [*worker, "-c", "2", "-Q", self.queue, "-n", f"run-{run}@%h"],
            self.env,
            self.logs,
            "ready.",
        )
        self.deadlines = Process(
            "deadlines",
            [*worker, "-c", "1", "-Q", f"{self.queue}-deadlines", "-n", f"deadlines-{run}@%h"],
            # The deadlines worker hosts the clock (gateway.clock), as under `manage.py serve`.
            {**self.env, "GATEWAY_CLOCK": "true"},
            self.logs,
            "ready.",
        )
        self.processes = [self.web, self.worker, self.deadlines]
        self.token = ""
        # Runs are started by another user than the reviewer who decides them (four-eyes is
        # the default for blocking tools): an agent's service account.
        self.starter_token = ""
        self.stopping = threading.Event()

    # Setup and teardown -----------------------------------------------------------------

    def manage(self, *args: str) -> str:
        done = subprocess.run(
            [sys.executable, str(ROOT / "manage.py"), *args],
            cwd=ROOT,
            env=self.env,
            capture_output=True,
            text=True,
        )
        if done.returncode:
            raise RuntimeError(f"manage.py {' '.join(args)} failed:\n{done.stderr[-3000:]}")
        return done.stdout

    def start(self) -> None:
        self.pg.init()
        self.pg.start()
        self.pg.admin(f"CREATE DATABASE {self.database}")
        self.redis.start(persistent=False)
        self.manage("migrate", "-v0")
        self.manage("load_agents", str(HERE / "agents.yaml"))
        printed = self.manage("demo_reviewer", "--username", "faults")
        self.token = printed.split("Token:")[1].split()[0]
        printed = self.manage("demo_reviewer", "--username", "faults-agent")
        self.starter_token = printed.split("Token:")[1].split()[0]
        for process in self.processes:
            process.start(wait=False)
        for process in self.processes:
            process.wait_ready()
        threading.Thread(target=self.supervise, name="supervisor", daemon=True).start()

    def supervise(self) -> None:
        """What a process supervisor does in production (systemd's Restart=always, see
        "Running in production" in docs/settings.md): a process that exits by itself is
        started again.
        Celery's worker exits on some broker connection losses ("Unrecoverable error" in
        kombu's reconnect path when Redis restarts) and relies on being restarted."""
        while not self.stopping.wait(0.5):
            for process in self.processes:
                if process.supervise():
                    print(f"supervisor: {process.name} exited by itself; started again")

    def stop(self) -> None:
        self.stopping.set()
        for process in self.processes:
            with process.lock:
                process.wanted = False
            process.signal(signal.SIGKILL)
        self.redis.stop()
        self.pg.stop("immediate")

    def ensure_up(self) -> None:
        """After a scenario: every service and process running again."""
        if not self.pg.running():
            self.pg.start()
        if not (self.redis.proc and self.redis.proc.poll() is None):
            self.redis.start()
        for process in self.processes:
            if not process.alive():
                process.start()

        def api_answers() -> bool:
            try:
                return self.call("GET", "/api/suspensions?limit=1", timeout=5)[0] == 200
            except OSError:
                return False

        # A scenario that left the web process unable to reach the database fails itself;
        # the next one starts from a gateway that answers.
        wait_until(api_answers, 90, "the API to answer", 0.5)

    # Talking to it ----------------------------------------------------------------------

    def call(
        self,
        method: str,
        path: str,
        body: Any = None,
        timeout: float = 30,
        token: str | None = None,
    ) -> tuple[int, Any]:
        """(status, JSON body) as the reviewer (or with `token`); a refused or dropped
        connection raises OSError."""
        data = json.dumps(body).encode() if body is not None else None
        request = urllib.request.Request(self.base_url + path, data=data, method=method)
        request.add_header("Authorization", f"Bearer {token or self.token}")
        request.add_header("Content-Type", "application/json")
        try:
            with urllib.request.urlopen(request, timeout=timeout) as response:
                return response.status, json.loads(response.read() or b"null")
        except urllib.error.HTTPError as e:
            raw = e.read()
            try:
                return e.code, json.loads(raw)
            except ValueError:
                return e.code, {"raw": raw[:500].decode(errors="replace")}

    def db(self) -> psycopg.Connection:
        return psycopg.connect(self.env["DATABASE_URL"], autocommit=True)

    def sql(self, query: str, *params: Any) -> list[tuple]:
        with self.db() as conn:
            return conn.execute(query, params).fetchall()

    def start_threads(self, agent: str, count: int, parallel: int = 8) -> list[str]:
        """Start `count` runs of `agent` over HTTP; their ids."""
        from concurrent.futures import ThreadPoolExecutor

        def one(i: int) -> str:
            status, body = self.call(
                "POST",
                "/api/threads",
                {"agent": agent, "message": f"fault run {i}"},
                token=self.starter_token,
            )
            assert status == 201, (status, body)
            return body["id"]

        with ThreadPoolExecutor(parallel) as pool:
            return list(pool.map(one, range(count)))

    def wait_suspended(self, threads: list[str], timeout: float = 120) -> list[tuple]:
        """Wait until every thread has a pending suspension: (suspension, thread, expires_at)."""

        def suspended() -> list[tuple] | None:
            rows = self.sql(
                "SELECT s.id::text, s.thread_id::text, s.expires_at FROM agents_suspension s "
                "JOIN agents_thread t ON t.id = s.thread_id "
                "WHERE s.thread_id = ANY(%s::uuid[]) AND s.status = 'pending' "
                "AND t.status = 'suspended'",
                threads,
            )
            return rows if len(rows) == len(threads) else None

        return wait_until(suspended, timeout, f"{len(threads)} threads to suspend", 0.25)

    def unfinished(self, threads: list[str]) -> int:
        return self.sql(
            "SELECT count(*) FROM agents_thread WHERE id = ANY(%s::uuid[]) "
            "AND status NOT IN ('completed', 'failed', 'cancelled')",
            threads,
        )[0][0]

    def wait_finished(self, threads: list[str], timeout: float) -> float:
        """Seconds until every thread ended; fails with how many did not."""
        started = time.monotonic()
        deadline = started + timeout
        while True:
            left = self.unfinished(threads)
            if not left:
                return time.monotonic() - started
            if time.monotonic() > deadline:
                raise AssertionError(
                    f"{left} of {len(threads)} threads still unfinished after {timeout:.0f}s "
                    f"(logs in {self.logs})"
                )
            time.sleep(0.2)

    def restore_unacked(self) -> int:
        """Do now what kombu does every so often (up to ~100 s apart with its defaults): put
        back every unacknowledged message older than the visibility timeout. Returns how many
        it put back."""
        import redis

        client = redis.Redis.from_url(self.redis.url)
        before = client.zcard("unacked_index")
        self.manage(
            "shell",
            "-c",
            "from gateway.celery import app\n"
            "with app.connection_for_write() as conn:\n"
            "    conn.default_channel.qos.restore_visible(num=10000, interval=1)\n",
        )
        return before - client.zcard("unacked_index")

    def rss_kib(self, process: Process) -> int:
        for line in Path(f"/proc/{process.pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
        return 0
