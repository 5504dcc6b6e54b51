"""Browser tests: Chromium through Playwright against a live daphne and a real Celery worker.

daphne runs as a subprocess on this run's test database (tests.conftest.worker_env), like the
worker, so the browser, the server, the worker and the test all see the same rows.
"""

import os
import shutil
import socket
import subprocess
import sys
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import ARTIFACTS, ROOT, ChildProcess, wait_for, worker_env

CHROMIUM = os.environ.get("CHROMIUM", "/usr/bin/chromium")
CHROMIUM_ARGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--disable-quic",
]
DESKTOP = {"width": 1280, "height": 800}
PHONE = {"width": 390, "height": 844}
PASSWORD = "e2e-password-1"

# The screenshots the README and docs/ show, by the name a test gives them: with
# UPDATE_SCREENSHOTS=1 the browser tests that take them write them to docs/screenshots/ too.
DOCS_SCREENSHOTS = {
    "a11y-thread-desktop-light": "thread-desktop",
    "a11y-thread-phone-light": "thread-phone",
    "select-desktop": "select-desktop",
    "select-phone": "select-phone",
    "keys-desktop": "keys-desktop",
    "grants-card-phone": "grants-card-phone",
}


def publish(name: str) -> None:
    """Copy test-artifacts/NAME.png to docs/screenshots/ when it is one the docs show and
    UPDATE_SCREENSHOTS=1."""
    if os.environ.get("UPDATE_SCREENSHOTS") == "1" and name in DOCS_SCREENSHOTS:
        shots = ROOT / "docs" / "screenshots"
        shutil.copy(ARTIFACTS / f"{name}.png", shots / f"{DOCS_SCREENSHOTS[name]}.png")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class LiveServer(ChildProcess):
    """daphne serving gateway.asgi on a free port; restart() keeps the port, as a deploy would."""

    def __init__(self, log_dir: Path) -> None:
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.log_dir = log_dir
        self.proc: subprocess.Popen | None = None
        self.count = 0

    def start(self) -> None:
        self.count += 1
        self.log = self.log_dir / f"daphne-{self.count}.log"
        self.proc = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "daphne",
                "-b",
                "127.0.0.1",
                "-p",
                str(self.port),
                "gateway.asgi:application",
            ],
            cwd=ROOT,
            env=self.env(),
            stdout=self.log.open("w"),
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
        wait_for(self.answers, timeout=60, what="daphne to answer")

    def env(self) -> dict[str, str]:
        env = worker_env()
        env.pop("DJANGO_ALLOW_ASYNC_UNSAFE", None)  # daphne keeps Django's safety check
        env["WEBSOCKET_ALLOWED_ORIGINS"] = self.url  # the pages the browser opens come from here
        return env

    def answers(self) -> bool:
        if self.proc is not None and self.proc.poll() is not None:
            raise RuntimeError(f"daphne exited:\n{self.log.read_text()[-3000:]}")
        try:
            with urllib.request.urlopen(f"{self.url}/healthz", timeout=2) as r:
                return r.status == 200
        except OSError:
            return False


@pytest.fixture(scope="session")
def daphne_server(
    django_db_setup: Any, django_db_blocker: Any, tmp_path_factory: Any
) -> Iterator[LiveServer]:
    with django_db_blocker.unblock():
        server = LiveServer(tmp_path_factory.mktemp("daphne"))
        server.start()
    yield server
    server.stop()


@pytest.fixture(autouse=True)
def orm_beside_playwright(monkeypatch: pytest.MonkeyPatch) -> None:
    """Playwright's sync API drives Chromium from an asyncio loop in this (the main) thread,
    and Django refuses ORM calls from a thread with a running loop. The tests' own ORM calls
    are plain blocking code between browser steps, so the check is off, for these tests only
    (LiveServer.start keeps it out of daphne's environment)."""
    monkeypatch.setenv("DJANGO_ALLOW_ASYNC_UNSAFE", "true")


# Per module, not per session: the loop Playwright leaves running in the main thread would
# break the async_to_sync calls of the tests that run after these.
@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    # A missing browser fails the run: these tests are how the reviewer UI is proven to work.
    if not (Path(CHROMIUM).exists() or shutil.which(CHROMIUM)):
        pytest.fail(f"Chromium not found at {CHROMIUM}; install it (make system-packages)")
    from playwright.sync_api import sync_playwright

    with sync_playwright() as p:
        chromium = p.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        # A page update is an event, a fragment request and a swap through daphne and, for a
        # decision, the worker: on a 2-core CI machine running all of them beside Chromium, a
        # burst can take longer than Playwright's 5 s default (seen once, in the breadcrumb
        # test). A lost update never arrives at all, so waiting longer hides no bug.
        from playwright.sync_api import expect

        expect.set_options(timeout=15_000)
        yield chromium
        chromium.close()


def off_the_loop(work: Any) -> Any:
    """Run an action in a plain thread, as another server process would: its post-commit
    wake-up must not run inside Playwright's event loop, which owns this thread."""
    import threading

    from django import db

    result: list[Any] = []

    def call() -> None:
        try:
            result.append(work())
        finally:
            db.connection.close()

    thread = threading.Thread(target=call)
    thread.start()
    thread.join()
    assert result, "the action failed; see the log above"
    return result[0]


class HttpApi:
    """Calls the live server's JSON API with a bearer token, as an agent operator's client does.

    Over HTTP rather than in-process: this process runs Playwright's event loop, and the
    post-commit socket wake-up (agents.events) must not run inside it."""

    def __init__(self, url: str, user: Any) -> None:
        import httpx

        from access.models import ApiToken

        _, raw = ApiToken.issue(user, "e2e")
        self.client = httpx.Client(
            base_url=url, headers={"Authorization": f"Bearer {raw}"}, timeout=30
        )

    def get(self, path: str, **params: Any) -> Any:
        return self.client.get(path, params=params)

    def post(self, path: str, data: Any = None) -> Any:
        return self.client.post(path, json=data if data is not None else {})


class Site:
    """One test's view of the live site: log people in, open pages, take screenshots."""

    def __init__(self, server: LiveServer, browser: Any, users: dict[str, Any]) -> None:
        self.server = server
        self.browser = browser
        self.users = users
        self.contexts: list[Any] = []
        self.dialogs: list[str] = []
        self.errors: list[str] = []

    def url(self, path: str) -> str:
        return self.server.url + path

    def api(self, who: str) -> HttpApi:
        return HttpApi(self.server.url, self.users[who])

    def login(self, who: str, viewport: dict[str, int] = DESKTOP, **options: Any) -> Any:
        """A fresh browser context logged in as `who` through the login page; returns a page."""
        context = self.browser.new_context(viewport=viewport, **options)
        self.contexts.append(context)
        page = context.new_page()
        # Any alert, confirm or prompt means script ran that should not have (invariant 6).
        page.on("dialog", lambda d: (self.dialogs.append(d.message), d.dismiss()))
        page.on("pageerror", lambda e: self.errors.append(f"{e} at {page.url}: {e.stack}"))
        page.goto(self.url("/login/"))
        page.fill("input[name=username]", self.users[who].username)
        page.fill("input[name=password]", PASSWORD)
        page.click("button[type=submit]")
        page.wait_for_url(self.url("/"))
        return page

    def shoot(self, page: Any, name: str) -> None:
        ARTIFACTS.mkdir(exist_ok=True)
        page.screenshot(path=str(ARTIFACTS / f"{name}.png"), full_page=True)
        publish(name)

    def close(self) -> None:
        for context in self.contexts:
            context.close()


@pytest.fixture
def site(
    daphne_server: LiveServer, browser: Any, worker: Any, users: dict[str, Any]
) -> Iterator[Site]:
    from django.contrib.auth.hashers import PBKDF2PasswordHasher

    # daphne checks passwords with the production hashers, not the tests' fast MD5 one; a low
    # iteration count keeps the login quick.
    hasher = PBKDF2PasswordHasher()
    for user in users.values():
        user.password = hasher.encode(PASSWORD, hasher.salt(), iterations=1000)
        user.save(update_fields=["password"])
    if daphne_server.proc is None or daphne_server.proc.poll() is not None:
        daphne_server.start()
    site = Site(daphne_server, browser, users)
    yield site
    site.close()
    assert not site.dialogs, f"a dialog fired: {site.dialogs}"
    assert not site.errors, f"the page threw: {site.errors}"
