"""Outside agents against a live gateway: daphne (and, for deadlines and the browser, the
Celery worker) from the browser tests' fixtures, and a reviewer who decides over HTTP."""

import threading
import time
from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from tests.conftest import wait_for
from tests.e2e.conftest import (  # noqa: F401 - fixtures, used by name
    LiveServer,
    browser,
    daphne_server,
    orm_beside_playwright,
    site,
)


def token(user: Any, *scopes: str) -> str:
    from access.models import ApiToken

    return ApiToken.issue(user, "external-tests", list(scopes) or None)[1]


class Reviewer:
    """Decides requests over the live API, as a person's client would."""

    def __init__(self, url: str, user: Any) -> None:
        self.http = httpx.Client(
            base_url=url, headers={"Authorization": f"Bearer {token(user, 'decide')}"}, timeout=30
        )

    def pending(self, agent: str) -> list[dict[str, Any]]:
        r = self.http.get("/api/suspensions", params={"status": "pending", "agent": agent})
        r.raise_for_status()
        return r.json()["results"]

    def decide(self, agent: str, decision: dict[str, Any], timeout: float = 30) -> dict[str, Any]:
        [s] = wait_for(lambda: self.pending(agent), timeout=timeout, what=f"a request of {agent}")
        r = self.http.post(
            f"/api/threads/{s['thread']}/suspensions/{s['id']}/resume", json=decision
        )
        assert r.status_code == 202, r.text
        return s

    def decide_later(self, agent: str, decision: dict[str, Any]) -> "Later":
        return Later(lambda: self.decide(agent, decision))


class Later:
    """Work in a thread of its own; result() joins it and hands back what it returned."""

    def __init__(self, work: Any) -> None:
        self.value: list[Any] = []
        self.error: list[BaseException] = []

        def run() -> None:
            from django import db

            try:
                self.value.append(work())
            except BaseException as e:  # handed to the test by result()
                self.error.append(e)
            finally:
                db.connection.close()

        self.thread = threading.Thread(target=run)
        self.thread.start()

    def result(self, timeout: float = 60) -> Any:
        self.thread.join(timeout)
        if self.error:
            raise self.error[0]
        assert self.value, "the work did not finish"
        return self.value[0]


@pytest.fixture
def gateway_url(
    daphne_server: LiveServer,  # noqa: F811 - the imported session fixture, requested by name
    transactional_db: Any,
) -> Iterator[str]:
    if daphne_server.proc is None or daphne_server.proc.poll() is not None:
        daphne_server.start()
    yield daphne_server.url


@pytest.fixture
def reviewer(gateway_url: str, users: dict[str, Any]) -> Reviewer:
    return Reviewer(gateway_url, users["reviewer"])


@pytest.fixture
def agent_token(users: dict[str, Any]) -> str:
    """The outside agent's token: its operator's, with the runs scope only."""
    return token(users["operator"], "runs")


def approve_edited(box: Any, fields: dict[str, str]) -> None:
    """Edit a card's arguments through its form, review the change, approve the edit."""
    box.get_by_role("button", name="Edit…").click()
    for name, value in fields.items():
        box.locator(f".schema-form input[name=field-{name}]").fill(value)
    box.get_by_role("button", name="Review changes").click()
    box.get_by_role("button", name="Approve edited").click()


def elapsed(since: float) -> float:
    return time.monotonic() - since
