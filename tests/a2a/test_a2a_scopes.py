"""A2A and token scopes and limits, against a live daphne: each scope opens its methods (runs
starts tasks and sees its user's own, read sees all, decide decides), a missing scope is HTTP
403 naming it; a revoked token is 401; floods of new tasks and of decisions get 429 with
Retry-After, and so does a new task for an agent at its pending cap."""

import uuid
from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from access import ratelimits, tokens
from access.models import ApiToken
from agents.models import Suspension, Thread
from tests.a2a.conftest import Gateway
from tests.approvals import state
from tests.conftest import wait_for
from tests.e2e.conftest import LiveServer

pytestmark = [pytest.mark.worker]


def scoped(gateway: Gateway, who: str, *scopes: str) -> str:
    """A caller name for gateway.rpc: `who` with a token of exactly `scopes`."""
    key = f"{who}:{'+'.join(scopes)}"
    gateway.tokens[key] = ApiToken.issue(gateway.users[who], "a2a scoped", list(scopes))[1]
    return key


def new_task(agent: str = "payer") -> dict[str, Any]:
    message = {
        "messageId": uuid.uuid4().hex,
        "role": "ROLE_USER",
        "parts": [{"text": "Pay invoice 118"}],
        "metadata": {"agent": agent},
    }
    return {"message": message, "configuration": {"returnImmediately": True}}


def decision(task_id: str, suspension: Any, approved: bool = True) -> dict[str, Any]:
    part = {"data": {"decision": {"suspension": str(suspension), "approved": approved}}}
    message = {"messageId": uuid.uuid4().hex, "role": "ROLE_USER", "taskId": task_id}
    return {"message": {**message, "parts": [part]}, "configuration": {"returnImmediately": True}}


def result(r: httpx.Response) -> Any:
    assert r.status_code == 200, r.text
    assert "error" not in r.json(), r.text
    return r.json()["result"]


def refused(r: httpx.Response, status: int, code: int, reason: str) -> dict[str, Any]:
    assert r.status_code == status, r.text
    error = r.json()["error"]
    assert error["code"] == code and error["data"][0]["reason"] == reason, error
    return error


def needs(r: httpx.Response, scope: str) -> None:
    error = refused(r, 403, -31403, "PERMISSION_DENIED")
    assert error["data"][0]["metadata"] == {"scope": scope}
    assert scope in error["message"]


class A2AScopesTestCase:
    def test_each_scope_opens_its_methods_and_no_others(self, gateway: Gateway) -> None:
        # Bob's task waits for an approval; Alice holds one token per scope.
        theirs = result(gateway.rpc("SendMessage", new_task(), who="teammate"))["task"]["id"]
        wait_for(
            lambda: Thread.objects.filter(pk=theirs, status=Thread.Status.SUSPENDED).exists(),
            what="Bob's task to wait for approval",
        )
        [pending] = Suspension.objects.filter(thread_id=theirs)
        runs = scoped(gateway, "reviewer", "runs")
        reads = scoped(gateway, "reviewer", "read")
        decides = scoped(gateway, "reviewer", "decide")

        mine = result(gateway.rpc("SendMessage", new_task(), who=runs))["task"]["id"]
        assert result(gateway.rpc("GetTask", {"id": mine}, who=runs))["id"] == mine
        needs(gateway.rpc("GetTask", {"id": theirs}, who=runs), "read")
        listed = result(gateway.rpc("ListTasks", {}, who=runs))["tasks"]
        assert [t["id"] for t in listed] == [mine]
        needs(gateway.rpc("SendMessage", decision(theirs, pending.pk), who=runs), "decide")
        needs(gateway.rpc("CancelTask", {"id": theirs}, who=runs), "decide")

        needs(gateway.rpc("SendMessage", new_task(), who=reads), "runs")
        assert result(gateway.rpc("GetTask", {"id": theirs}, who=reads))["id"] == theirs
        listed = result(gateway.rpc("ListTasks", {}, who=reads))["tasks"]
        assert {t["id"] for t in listed} == {mine, theirs}
        needs(gateway.rpc("SendMessage", decision(theirs, pending.pk), who=reads), "decide")
        pending.refresh_from_db()
        assert pending.status == Suspension.Status.PENDING

        needs(gateway.rpc("ListTasks", {}, who=decides), "read or runs")
        result(gateway.rpc("SendMessage", decision(theirs, pending.pk), who=decides))
        pending.refresh_from_db()
        assert pending.status == Suspension.Status.APPROVED
        assert pending.decided_by == gateway.users["reviewer"]

    def test_a_revoked_token_is_refused_saying_so(self, gateway: Gateway) -> None:
        runs = scoped(gateway, "reviewer", "runs")
        result(gateway.rpc("ListTasks", {}, who=runs))
        tokens.revoke(ApiToken.objects.get(name="a2a scoped"))
        error = refused(gateway.rpc("ListTasks", {}, who=runs), 401, -31401, "UNAUTHENTICATED")
        assert "revoked" in error["message"]


class LimitedServer(LiveServer):
    """daphne with tight limits, as a deployment would set them in its environment."""

    LIMITS = {
        "RATE_LIMIT_RUNS": "3/minute",
        "RATE_LIMIT_USER_RUNS": "100/minute",
        "RATE_LIMIT_DECISIONS": "3/minute",
        "RATE_LIMIT_USER_DECISIONS": "100/minute",
        "MAX_PENDING_PER_AGENT": "5",
    }

    def env(self) -> dict[str, str]:
        return {**super().env(), **self.LIMITS}


@pytest.fixture(scope="module")
def limited_server(
    django_db_setup: Any, django_db_blocker: Any, tmp_path_factory: Any
) -> Iterator[LimitedServer]:
    with django_db_blocker.unblock():
        server = LimitedServer(tmp_path_factory.mktemp("limited"))
        server.start()
    yield server
    server.stop()


@pytest.mark.django_db(transaction=True)
class A2ALimitsTestCase:
    @pytest.fixture(autouse=True)
    def setup(self, limited_server: LimitedServer, users: dict[str, Any]) -> None:
        ratelimits.storage().reset()  # Redis keeps counters between tests
        self.url = limited_server.url
        self.users = users
        self.tokens = {who: ApiToken.issue(user, "a2a limits")[1] for who, user in users.items()}

    def rpc(self, method: str, params: dict[str, Any], who: str = "reviewer") -> httpx.Response:
        body = {"jsonrpc": "2.0", "id": 1, "method": method, "params": params}
        headers = {"Authorization": f"Bearer {self.tokens[who]}", "A2A-Version": "1.0"}
        return httpx.post(f"{self.url}/a2a", json=body, headers=headers, timeout=60)

    def assert_too_many(self, r: httpx.Response, reason: str) -> None:
        error = refused(r, 429, -31429, reason)
        wait = int(r.headers["Retry-After"])
        assert 1 <= wait <= 60
        assert error["data"][0]["metadata"] == {"retryAfter": str(wait)}

    def test_a_flood_of_new_tasks_gets_429_while_others_keep_working(self) -> None:
        state.agent("payer")
        answers = [self.rpc("SendMessage", new_task()) for _ in range(6)]
        for r in answers[:3]:
            result(r)
        for r in answers[3:]:
            self.assert_too_many(r, "RATE_LIMITED")
        assert Thread.objects.filter(created_by=self.users["reviewer"]).count() == 3
        result(self.rpc("SendMessage", new_task(), who="teammate"))

    def test_a_flood_of_decisions_gets_429(self) -> None:
        thread, [s] = state.suspended(self.users["teammate"])
        answers = [self.rpc("SendMessage", decision(str(thread.pk), s.pk)) for _ in range(5)]
        for r in answers[:3]:
            result(r)  # the decision, then the same decision again (answered as recorded)
        for r in answers[3:]:
            self.assert_too_many(r, "RATE_LIMITED")
        s.refresh_from_db()
        assert s.status == Suspension.Status.APPROVED and s.decided_by == self.users["reviewer"]

    def test_a_new_task_for_an_agent_at_its_cap_gets_429(self) -> None:
        for _ in range(5):
            state.suspended(self.users["teammate"])
        self.assert_too_many(self.rpc("SendMessage", new_task()), "TOO_MANY_PENDING")
        assert Thread.objects.filter(created_by=self.users["reviewer"]).count() == 0
        state.agent("helpdesk")
        result(self.rpc("SendMessage", new_task("helpdesk")))
