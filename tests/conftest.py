"""Shared fixtures: the three users, an API client, a real Celery worker, and waiting helpers.

The setup under test comes from the environment, as in production: with DATABASE_URL and
REDIS_URL the tests use PostgreSQL and Redis, and fail loudly when either is down; without
them, the embedded default (SQLite file, filesystem broker, sockets tailing the Event table).
"""

import json
import os
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parent.parent
ARTIFACTS = ROOT / "test-artifacts"


def wait_for(
    predicate: Callable[[], Any], timeout: float = 10.0, interval: float = 0.05, what: str = ""
) -> Any:
    """Poll until `predicate()` is truthy; fail with `what` when it never is."""
    deadline = time.monotonic() + timeout
    while True:
        value = predicate()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout}s waiting for {what or predicate}")
        time.sleep(interval)


@pytest.fixture
def users(db: Any, settings: Any) -> dict[str, Any]:
    """A reviewer, a teammate (also a reviewer), an outsider with no access, an admin, and an
    operator who starts runs and decides none."""
    from django.contrib.auth.models import Group, Permission, User

    from access.permissions import REVIEWERS

    # The production hasher is slow on purpose; four users a test would cost about a second.
    settings.PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]
    group = Group.objects.get(name=REVIEWERS)
    made = {}
    for name in ("alice", "bob", "mallory"):
        user = User.objects.create_user(name, password=f"{name}-password-1")
        if name != "mallory":
            user.groups.add(group)
        made[name] = user
    made["admin"] = User.objects.create_superuser("admin", password="admin-password-1")
    # Four eyes (agents.policy) is the default: whoever starts a run may not decide it. Tests
    # that are not about policy start runs as the operator, who may start and read runs but
    # decides nothing, and decide as a reviewer.
    operator = User.objects.create_user("olivia", password="olivia-password-1")
    operator.user_permissions.add(
        *Permission.objects.filter(
            content_type__app_label="agents",
            codename__in=["add_thread", "view_thread", "change_thread", "view_suspension"],
        )
    )
    return {
        "reviewer": made["alice"],
        "teammate": made["bob"],
        "outsider": made["mallory"],
        "admin": made["admin"],
        "operator": operator,
    }


class Api:
    """Calls the JSON API in-process with a bearer token, as a client would."""

    def __init__(self, user: Any = None) -> None:
        from django.test import Client

        self.client = Client()
        self.headers: dict[str, str] = {}
        if user is not None:
            from access.models import ApiToken

            _, raw = ApiToken.issue(user, "tests")
            self.headers["Authorization"] = f"Bearer {raw}"

    def get(self, path: str, **params: Any) -> Any:
        return self.client.get(path, params, headers=self.headers)

    def post(self, path: str, data: Any = None, raw: str | None = None) -> Any:
        body = raw if raw is not None else json.dumps(data if data is not None else {})
        return self.client.post(path, body, content_type="application/json", headers=self.headers)


OPERATOR = "olivia"


def operator() -> Any:
    """The users fixture's operator: starts the runs that reviewers decide (four eyes)."""
    from django.contrib.auth.models import User

    return User.objects.get(username=OPERATOR)


def operator_of(client: Any) -> Any:
    """A client of the same kind as `client` (Api, or tests.e2e's HttpApi) for the operator:
    tests that are not about policy start runs with it and decide with `client`."""
    if isinstance(client, Api):
        return Api(operator())
    return type(client)(str(client.client.base_url), operator())


@pytest.fixture
def api(users: dict[str, Any]) -> Callable[[str], Api]:
    """api("reviewer") is that user's client; api(None) is anonymous."""
    return lambda who: Api(users[who] if who else None)


@pytest.fixture
def load_agents(db: Any) -> Callable[[str], None]:
    from agents.agentfiles import load, parse

    def loader(text: str) -> None:
        path = Path(tempfile.mkstemp(suffix=".yaml")[1])
        path.write_text(text)
        parse(text)
        load([path])

    return loader


@pytest.fixture(scope="session")
def smtp_server() -> Iterator[Any]:
    """A real SMTP server (aiosmtpd) for the session; the worker sends its email there."""
    from tests.smtp import SmtpServer

    server = SmtpServer()
    server.start()
    yield server
    server.stop()


@pytest.fixture
def mailbox(smtp_server: Any, settings: Any) -> Any:
    """The session's SMTP server, emptied, with Django's SMTP backend sending to it from this
    process too."""
    for key, value in smtp_server.settings().items():
        setattr(settings, key, value)
    smtp_server.mailbox.clear()
    return smtp_server.mailbox


# What every live gateway and worker a test starts holds an MCP call to, whichever test
# starts it (the servers are shared by the session): a hold short enough that a test sees a
# held call give up, yet longer than an approved call's first run in a new worker child on a
# loaded machine (it loads the MCP client there, then opens the upstream's session: over 6 s
# in CI); and a worker's lease on the call it makes (mcp_gateway.runner), renewed every third
# of it, short so that a test sees a killed worker's call finished as interrupted. Given to
# those processes only: this process's environment stays as it was, so a `make run` a test
# starts (tests/test_readme.py) holds as the settings say.
LIVE_ENV = {"MCP_HOLD_SECONDS": "15", "MCP_CALL_LEASE_SECONDS": "3"}


def worker_env(smtp: Any = None) -> dict[str, str]:
    """The environment a worker needs to share this test run's database and broker (and,
    given `smtp`, to send email to that server), with LIVE_ENV."""
    from django.db import connection

    env = {**os.environ, **LIVE_ENV}
    if smtp is not None:
        env.update({key: str(value) for key, value in smtp.settings().items()})
    settings_dict = connection.settings_dict
    if settings_dict["ENGINE"].endswith("sqlite3"):
        env["DATABASE_URL"] = f"sqlite:///{settings_dict['NAME']}"
    else:
        user = settings_dict.get("USER") or ""
        password = f":{settings_dict['PASSWORD']}" if settings_dict.get("PASSWORD") else ""
        auth = f"{user}{password}@" if user else ""
        env["DATABASE_URL"] = (
            f"postgres://{auth}{settings_dict.get('HOST') or '127.0.0.1'}:"
            f"{settings_dict.get('PORT') or 5432}/{settings_dict['NAME']}"
        )
    env["PYTHONPATH"] = str(ROOT)
    return env


class ChildProcess:
    """A process a fixture starts (`start` is the subclass's) and stops, or restarts."""

    proc: subprocess.Popen | None = None

    def start(self) -> None:
        raise NotImplementedError

    def stop(self) -> None:
        if self.proc and self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=20)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()

    def restart(self) -> None:
        self.stop()
        self.start()


class WorkerProcess(ChildProcess):
    """`celery worker` on gateway's app with the clock, gated (tests.worker_gate): `gate.close()`
    waits for its running tasks to end and holds every later one, the clock's rounds included,
    at its start."""

    def __init__(self, log_dir: Path, smtp: Any = None) -> None:
        from tests.worker_gate import Gate

        self.log_dir = log_dir
        self.smtp = smtp
        self.proc: subprocess.Popen | None = None
        self.count = 0
        self.gate = Gate(log_dir)

    def stop(self) -> None:
        self.gate.open()  # a warm shutdown waits for the tasks held at the gate
        super().stop()

    def start(self) -> None:
        from django.conf import settings

        from tests import worker_gate

        self.count += 1
        log = self.log_dir / f"worker-{self.count}.log"
        self.log = log
        self.proc = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "celery",
                "-A",
                "tests.worker_gate",
                "worker",
                "-l",
                "info",
                "-c",
                "2",
                "-Q",
                f"{settings.CELERY_TASK_DEFAULT_QUEUE},{settings.CELERY_DEADLINE_QUEUE}",
                "--without-gossip",
                "--without-mingle",
                "-n",
                f"test{self.count}@%h",
            ],
            cwd=ROOT,
            # Runs, deadlines and the clock (gateway.clock) in one worker, so two steps at
            # once in it: prefork.
            # WORKER_POOL's default, solo, runs one at a time (the fault suite and `make run`
            # run that), and Celery takes the setting over -P.
            env={
                **worker_env(self.smtp),
                "WORKER_POOL": "prefork",
                "GATEWAY_CLOCK": "true",
                worker_gate.FOLDER: str(self.log_dir),
            },
            stdout=log.open("w"),
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
        wait_for(
            lambda: "ready." in log.read_text() or self.proc.poll() is not None,
            timeout=60,
            what="the Celery worker to start",
        )
        if self.proc.poll() is not None:
            raise RuntimeError(f"the Celery worker exited:\n{log.read_text()[-3000:]}")


@pytest.fixture(scope="session")
def worker_process(
    django_db_setup: Any, django_db_blocker: Any, tmp_path_factory: Any, smtp_server: Any
) -> Iterator[WorkerProcess]:
    with django_db_blocker.unblock():
        process = WorkerProcess(tmp_path_factory.mktemp("worker"), smtp_server)
        process.start()
    yield process
    process.stop()


@pytest.fixture
def worker(worker_process: WorkerProcess, transactional_db: Any) -> Iterator[WorkerProcess]:
    """A real Celery worker (with the clock) on this run's database and broker.

    The worker lives for the session, and its clock runs the sweeps on its own time: the worker's
    gate opens for the test and closes at its end, before the test's database is flushed. A
    flush (TRUNCATE) meeting a task's transaction can deadlock, and a task landing after the
    flush would leak into the next test; with the gate closed, the tasks running have ended
    and none starts until the next test that takes the worker.
    """
    if worker_process.proc is None or worker_process.proc.poll() is not None:
        worker_process.start()
    worker_process.gate.open()
    yield worker_process
    worker_process.gate.close()


@pytest.fixture(autouse=True)
def fresh_channel_layer() -> Iterator[None]:
    """A channel layer of its own for each test. channels keeps one per process, and
    channels-redis binds its receive lock to the event loop that first receives on it; a
    server process has one loop for its life, but each test's sockets run on a loop of their
    own (async_to_sync), and a receive still counted on a closed loop made the next test's
    receive use a lock bound to that loop ("bound to a different event loop")."""
    yield
    from channels.layers import channel_layers

    channel_layers.backends.clear()


def pytest_collection_modifyitems(config: Any, items: list[Any]) -> None:
    """Tests that start the real worker run last: once started it lives for the session, and a
    test that builds its rows by hand must not have a worker resuming them behind its back."""
    items.sort(key=lambda item: "worker" in getattr(item, "fixturenames", ()))


# Seconds the process may take to exit once the session is over. A thread that outlives the
# tests (an event loop that does not close, a server left running) would keep the interpreter
# waiting at exit with every test passed; CI would see only its own time limit, with nothing
# said. Instead, past this grace the stack of every thread is printed and the run fails.
EXIT_GRACE = 120


def pytest_unconfigure(config: Any) -> None:
    import faulthandler

    faulthandler.dump_traceback_later(EXIT_GRACE, exit=True, file=sys.__stderr__)


# Times a test's flush is tried when PostgreSQL refuses it for a lock (a deadlock or a lock
# timeout), and the pause between tries.
FLUSH_TRIES = 5
FLUSH_PAUSE = 0.5


@pytest.fixture(scope="session", autouse=True)
def flush_that_waits_its_turn() -> Iterator[None]:
    """A test's flush (one TRUNCATE of every table on PostgreSQL) retried when it meets a lock.

    The worker's gate (tests.worker_gate) keeps tasks out of the flush, but a test's server
    outlives the test's browser: when a page closes, daphne ends its socket's consumer (a
    presence release, an audit row) in a transaction of its own, and that transaction met the
    flush's TRUNCATE in a CI run ("couldn't be flushed", then every later test of that class
    failed on the rows left over). PostgreSQL breaks such a deadlock by failing one side; the
    flush, tried again once the other side has committed, removes its rows too. Any other error
    is raised at once.
    """
    from django.core.management.base import CommandError
    from django.db import OperationalError
    from django.test import TransactionTestCase

    original = TransactionTestCase._fixture_teardown

    def teardown(self: Any) -> None:
        for attempt in range(1, FLUSH_TRIES + 1):
            try:
                return original(self)
            except CommandError as error:
                cause = error.__cause__
                if not isinstance(cause, OperationalError) or attempt == FLUSH_TRIES:
                    raise
                print(f"\nthe flush met a lock ({cause}); again ({attempt})", file=sys.stderr)
                time.sleep(FLUSH_PAUSE)

    TransactionTestCase._fixture_teardown = teardown  # type: ignore[method-assign]
    yield
    TransactionTestCase._fixture_teardown = original  # type: ignore[method-assign]
