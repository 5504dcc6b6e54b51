"""What the benchmarks share: a gateway on a fresh database, its credentials, and percentiles.

`Gateway(agents_yaml, ...)` creates a database (PostgreSQL when DATABASE_URL is set, else
SQLite in a temporary folder), migrates it, loads the agents, creates the demo reviewer and
starts `manage.py serve` on a free port of 127.0.0.1; leaving the block stops the server and
drops the database.
"""

import contextlib
import http.client
import http.cookiejar
import json
import os
import re
import resource
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
import urllib.parse
import urllib.request
import uuid
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def pctl(values: list[float], p: float) -> float:
    """The p-th percentile (0..1) of seconds, in milliseconds."""
    values = sorted(values)
    return values[min(len(values) - 1, int(len(values) * p))] * 1000 if values else float("nan")


def summary(name: str, values: list[float]) -> str:
    mean = sum(values) / len(values) * 1000 if values else float("nan")
    return (
        f"{name:10} n {len(values):5}  p50 {pctl(values, 0.5):7.1f} ms  "
        f"p95 {pctl(values, 0.95):7.1f} ms  p99 {pctl(values, 0.99):7.1f} ms  "
        f"max {pctl(values, 1):7.1f} ms  mean {mean:7.1f} ms"
    )


def raise_file_limit(wanted: int = 20000) -> None:
    """Sockets are files: let this process and the server it starts open enough of them."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft < wanted:
        resource.setrlimit(resource.RLIMIT_NOFILE, (min(wanted, hard), hard))


class Gateway:
    def __init__(self, agents_yaml: str, serve_args: list[str] | None = None) -> None:
        self.agents_yaml = agents_yaml
        self.serve_args = serve_args or []
        self.tmp = Path(tempfile.mkdtemp(prefix="gw-bench-"))
        run = uuid.uuid4().hex[:8]
        self.env = dict(
            os.environ,
            GATEWAY_DATA_DIR=str(self.tmp),
            GATEWAY_QUEUE=f"bench-{run}",
            GATEWAY_PREFIX=f"bench{run}",
            PYTHONPATH=str(ROOT),
            LOG_LEVEL="WARNING",
            # The benchmarks measure the engine: its clients start and decide far faster than
            # the rate limits and the pending cap let one token (access.ratelimits).
            RATE_LIMIT_RUNS="",
            RATE_LIMIT_USER_RUNS="",
            RATE_LIMIT_DECISIONS="",
            RATE_LIMIT_USER_DECISIONS="",
            MAX_PENDING_PER_AGENT="0",
        )
        self.server_url = None
        self.database = None
        if os.environ.get("DATABASE_URL"):
            self.server_url = os.environ["DATABASE_URL"].rsplit("/", 1)[0]
            self.database = f"gw_bench_{run}"
            self.env["DATABASE_URL"] = f"{self.server_url}/{self.database}"
        self.manage = [sys.executable, str(ROOT / "manage.py")]
        self.port = free_port()
        self.base = f"http://127.0.0.1:{self.port}"
        self._local = threading.local()  # each thread's kept-alive connection (call)
        self.proc: subprocess.Popen | None = None

    @property
    def setup(self) -> str:
        if self.database:
            return "PostgreSQL + Redis" if self.env.get("REDIS_URL") else "PostgreSQL"
        return "embedded (SQLite + filesystem broker)"

    def _admin_sql(self, sql: str) -> None:
        import psycopg

        with psycopg.connect(f"{self.server_url}/postgres", autocommit=True) as conn:
            conn.execute(sql)

    def __enter__(self) -> "Gateway":
        raise_file_limit()
        if self.database:
            self._admin_sql(f"CREATE DATABASE {self.database}")
        try:
            self._start()
        except BaseException:
            self.__exit__()  # stop what started and drop the database
            raise
        return self

    def _start(self) -> None:
        subprocess.run([*self.manage, "migrate", "-v0"], env=self.env, check=True)
        (self.tmp / "agents.yaml").write_text(self.agents_yaml)
        subprocess.run(
            [*self.manage, "load_agents", str(self.tmp / "agents.yaml")],
            env=self.env,
            check=True,
            stdout=subprocess.DEVNULL,
        )
        printed = subprocess.run(
            [*self.manage, "demo_reviewer"],
            env=self.env,
            check=True,
            capture_output=True,
            text=True,
        ).stdout
        self.token = printed.split("Token:")[1].split()[0]
        self.username, self.password = re.search(r"Login:\s+(\S+) / (\S+)", printed).groups()
        self.proc = subprocess.Popen(
            [*self.manage, "serve", "--port", str(self.port), *self.serve_args],
            env=self.env,
            stdout=(self.tmp / "serve.log").open("w"),
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
        print(f"server log: {self.tmp / 'serve.log'}")
        deadline = time.monotonic() + 60
        while True:
            try:
                self.call("GET", "/api/events?after=0&limit=1")
                break
            except OSError:
                if time.monotonic() > deadline or self.proc.poll() is not None:
                    raise
                time.sleep(0.2)
        # Every process ready (serve says "Serving on" once its workers consume and beat runs),
        # not a fixed pause: a deadline that fell while beat was still starting was measured
        # late by as much as the start took.
        log = self.tmp / "serve.log"
        while "Serving on" not in log.read_text():
            if time.monotonic() > deadline + 60 or self.proc.poll() is not None:
                raise RuntimeError(f"the gateway did not get ready:\n{log.read_text()[-3000:]}")
            time.sleep(0.1)

    def processes(self) -> list[int]:
        """The server's processes (`manage.py serve` and every process under it)."""
        found, todo = [], [self.proc.pid]
        while todo:
            pid = todo.pop()
            found.append(pid)
            with contextlib.suppress(OSError):
                for task in Path(f"/proc/{pid}/task").iterdir():
                    children = (task / "children").read_text().split()
                    todo.extend(int(c) for c in children)
        return found

    def cpu_seconds(self) -> dict[str, float]:
        """CPU time (user + system) used so far by the server's processes, by kind, and by
        PostgreSQL's and Redis's server processes (the whole machine's: run nothing else)."""
        tick = os.sysconf("SC_CLK_TCK")
        used: dict[str, float] = {}

        def add(kind: str, pid: int) -> None:
            with contextlib.suppress(OSError):
                fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
                used[kind] = used.get(kind, 0.0) + (int(fields[11]) + int(fields[12])) / tick

        for pid in self.processes():
            with contextlib.suppress(OSError):
                cmd = Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode()
                kind = (
                    "daphne"
                    if "daphne" in cmd
                    # The deadlines worker, which hosts the clock (gateway.clock): its own line,
                    # so what the periodic work costs under load shows apart from the runs'.
                    else "deadlines"
                    if "celery" in cmd and "deadlines@" in cmd
                    else "worker"
                    if "celery" in cmd
                    else "serve"
                )
                add(kind, pid)
        for proc in Path("/proc").iterdir():
            if proc.name.isdigit():
                with contextlib.suppress(OSError):
                    comm = (proc / "comm").read_text().strip()
                    if comm.startswith(("postgres", "redis")):
                        add(
                            "postgresql" if comm.startswith("postgres") else "redis", int(proc.name)
                        )
        return used

    @contextlib.contextmanager
    def profiled(self, out: str | None) -> Any:
        """With `out`, py-spy samples every server process meanwhile and writes their stacks,
        collapsed (one line per stack with its count), to `out`."""
        if not out:
            yield
            return
        spy = subprocess.Popen(
            [
                str(Path(sys.executable).parent / "py-spy"),
                "record",
                "--pid",
                str(self.proc.pid),
                "--subprocesses",
                "--rate",
                "250",
                "--format",
                "raw",
                "--output",
                out,
                "--nonblocking",
                # Only the thread holding the GIL: where Python's CPU goes, not the threads
                # waiting on a socket (without it, waits on PostgreSQL and Redis fill the
                # profile as if they were work).
                "--gil",
            ],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        time.sleep(1)
        try:
            yield
        finally:
            spy.send_signal(signal.SIGINT)
            spy.wait(timeout=30)

    def __exit__(self, *exc: Any) -> None:
        if self.proc is not None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(self.proc.pid, signal.SIGINT)
            self.proc.wait(timeout=30)
        if self.database:
            self._admin_sql(f"DROP DATABASE IF EXISTS {self.database} WITH (FORCE)")

    def call(self, method: str, path: str, body: dict | None = None) -> dict:
        """One API call, on this thread's kept-alive connection, as an integration's HTTP
        client (requests' Session, httpx's Client) holds one. BENCH_NEW_CONNECTIONS=1 opens
        a connection per call instead, as the benchmarks did before 2026-11-24's seventh
        round (bench/README.md)."""
        data = json.dumps(body).encode() if body is not None else None
        headers = {"Authorization": f"Bearer {self.token}", "Content-Type": "application/json"}
        if os.environ.get("BENCH_NEW_CONNECTIONS"):
            req = urllib.request.Request(self.base + path, data=data, method=method)
            for name, value in headers.items():
                req.add_header(name, value)
            with urllib.request.urlopen(req, timeout=30) as r:
                return json.loads(r.read())
        for attempt in (1, 2):
            conn = getattr(self._local, "conn", None)
            fresh = conn is None
            if fresh:
                conn = self._local.conn = http.client.HTTPConnection(
                    "127.0.0.1", self.port, timeout=30
                )
            try:
                conn.request(method, path, body=data, headers=headers)
                response = conn.getresponse()
                payload = response.read()
            except (ConnectionError, http.client.HTTPException):
                conn.close()
                self._local.conn = None
                if fresh or attempt == 2:
                    raise
                continue  # the server closed the idle connection: once more on a new one
            if response.status >= 400:
                raise RuntimeError(f"{method} {path}: {response.status} {payload[:500]!r}")
            return json.loads(payload)
        raise AssertionError("unreachable")

    def session_cookie(self) -> str:
        """Log in through the login page, as a browser does; the cookie opens the socket."""
        jar = http.cookiejar.CookieJar()
        opener = urllib.request.build_opener(urllib.request.HTTPCookieProcessor(jar))
        page = opener.open(self.base + "/login/").read().decode()
        csrf = re.search(r'name="csrfmiddlewaretoken" value="([^"]+)"', page).group(1)
        form = urllib.parse.urlencode(
            {"username": self.username, "password": self.password, "csrfmiddlewaretoken": csrf}
        ).encode()
        request = urllib.request.Request(self.base + "/login/", data=form)
        request.add_header("Referer", self.base + "/login/")
        opener.open(request).read()
        cookies = {c.name: c.value for c in jar}
        return f"sessionid={cookies['sessionid']}"
