"""The Python client (clients/python, approval_client) against a live gateway: idempotent
raising across retries, connection errors, 429, long polls, require_approval and ask_human."""

import asyncio
import time
import uuid
from pathlib import Path
from typing import Any

import httpx
import pytest
from approval_client import (
    AsyncGateway,
    Gateway,
    GatewayError,
    Rejected,
    Retry,
    TimedOut,
    ask_human,
    require_approval,
)

from agents.models import Suspension
from tests.conftest import wait_for
from tests.e2e.conftest import LiveServer
from tests.external.conftest import Reviewer, elapsed

SCHEMA = {
    "type": "object",
    "properties": {"amount": {"type": "number"}, "to": {"type": "string"}},
    "required": ["amount", "to"],
}


class LoseFirstAnswer(httpx.HTTPTransport):
    """The first POST reaches the gateway, which makes the request; its answer is lost on
    the way back, as a dropped connection would lose it."""

    def __init__(self) -> None:
        super().__init__()
        self.posts = 0

    def handle_request(self, request: httpx.Request) -> httpx.Response:
        response = super().handle_request(request)
        if request.method == "POST":
            self.posts += 1
            if self.posts == 1:
                response.read()
                raise httpx.ReadError("connection reset by peer", request=request)
        return response


class ClientTestCase:
    @pytest.fixture(autouse=True)
    def setup(self, gateway_url: str, agent_token: str, reviewer: Reviewer) -> None:
        self.url, self.token, self.reviewer = gateway_url, agent_token, reviewer

    def gateway(self, **options: Any) -> Gateway:
        return Gateway(self.url, self.token, agent="payments-bot", **options)

    def test_a_lost_answer_is_retried_into_the_same_request(self) -> None:
        transport = LoseFirstAnswer()
        slept: list[float] = []
        with self.gateway(transport=transport, sleep=slept.append) as gw:
            made = gw.raise_request("pay", {"amount": 5, "to": "ACME"}, schema=SCHEMA)
        assert transport.posts == 2 and len(slept) == 1
        assert made.pending and made.idempotency_key
        assert Suspension.objects.count() == 1

    def test_the_same_key_twice_is_one_request(self) -> None:
        with self.gateway(run_id="run-7") as gw:
            first = gw.raise_request("pay", {"amount": 5, "to": "ACME"}, key="invoice-7")
            again = gw.raise_request("pay", {"amount": 5, "to": "ACME"}, key="invoice-7")
            assert again.id == first.id
            with pytest.raises(GatewayError) as refused:
                gw.raise_request("pay", {"amount": 6, "to": "ACME"}, key="invoice-7")
        assert refused.value.status == 409 and refused.value.code == "idempotency_key_reused"
        assert Suspension.objects.count() == 1

    def test_a_long_poll_answers_when_the_reviewer_decides(self) -> None:
        with self.gateway() as gw:
            made = gw.raise_request("pay", {"amount": 5, "to": "ACME"}, schema=SCHEMA)
            later = self.reviewer.decide_later(
                "payments-bot", {"approved": True, "modifiedArgs": {"amount": 4, "to": "ACME"}}
            )
            started = time.monotonic()
            got = gw.get(made.id, wait=30)
            later.result()
        assert got.approved is True and got.arguments == {"amount": 4, "to": "ACME"}
        # It waited for the decision, and answered soon after it, not at the end of the wait.
        assert elapsed(started) < 10

    def test_a_long_poll_answers_pending_at_the_end_of_the_wait(self) -> None:
        with self.gateway() as gw:
            made = gw.raise_request("pay", {"amount": 5, "to": "ACME"})
            started = time.monotonic()
            got = gw.get(made.id, wait=2)
        assert got.pending and 1.9 <= elapsed(started) < 8

    def test_require_approval_runs_the_function_with_the_approved_arguments(self) -> None:
        ran: list[tuple[int, str]] = []
        with self.gateway() as gw:

            @require_approval(gw, prompt="Pay {amount} to {to}?", schema=SCHEMA)
            def pay(amount: int, to: str) -> str:
                ran.append((amount, to))
                return f"paid {amount} to {to}"

            later = self.reviewer.decide_later(
                "payments-bot", {"approved": True, "modifiedArgs": {"amount": 90, "to": "ACME"}}
            )
            assert pay(120, "ACME") == "paid 90 to ACME"
            asked = later.result()
        assert ran == [(90, "ACME")]
        assert asked["prompt"] == "Pay 120 to ACME?" and asked["tool"] == "pay"

    def test_require_approval_raises_when_rejected(self) -> None:
        ran: list[int] = []
        with self.gateway() as gw:

            @require_approval(gw)
            def pay(amount: int) -> None:
                ran.append(amount)

            later = self.reviewer.decide_later(
                "payments-bot", {"approved": False, "reason": "wrong payee"}
            )
            with pytest.raises(Rejected) as rejected:
                pay(120)
            later.result()
        assert ran == [] and rejected.value.request.reason == "wrong payee"
        assert not isinstance(rejected.value, TimedOut)

    def test_ask_human_returns_the_answer(self) -> None:
        with self.gateway() as gw:
            later = self.reviewer.decide_later("payments-bot", {"response": "Use the EU account"})
            assert ask_human(gw, "Which account pays?") == "Use the EU account"
            assert later.result()["kind"] == "input"

    def test_the_async_client_raises_and_waits(self) -> None:
        async def main() -> tuple[Any, Any]:
            async with AsyncGateway(self.url, self.token, agent="payments-bot") as gw:
                ran: list[int] = []

                @require_approval(gw)
                async def pay(amount: int) -> int:
                    ran.append(amount)
                    return amount

                done = await asyncio.gather(pay(7), asyncio.to_thread(self.approve_one))
                return done[0], ran

        result, ran = asyncio.run(main())
        assert result == 7 and ran == [7]

    def approve_one(self) -> None:
        from django import db

        try:
            self.reviewer.decide("payments-bot", {"approved": True})
        finally:
            db.connection.close()


def test_the_long_poll_checks_who_is_asking(
    gateway_url: str, agent_token: str, users: dict[str, Any]
) -> None:
    from tests.external.conftest import token

    with Gateway(gateway_url, agent_token, agent="payments-bot") as gw:
        made = gw.raise_request("pay", {"amount": 1})
    path = f"{gateway_url}/api/requests/{made.id}"

    def get(who: str | None, url: str = path, wait: str = "5") -> httpx.Response:
        headers = {"Authorization": f"Bearer {who}"} if who else {}
        return httpx.get(url, params={"wait": wait}, headers=headers, timeout=30)

    started = time.monotonic()
    assert get(None).status_code == 401
    assert get("gw_not-a-token").status_code == 401
    other = get(token(users["teammate"], "runs"))
    assert other.status_code == 403 and other.json()["scope"] == "read"
    admin_only = get(token(users["admin"], "admin"))
    assert admin_only.status_code == 403 and admin_only.json()["error"] == "insufficient_scope"
    assert get(agent_token, f"{gateway_url}/api/requests/{uuid.uuid4()}").status_code == 404
    assert get(agent_token, wait="soon").status_code == 400
    # None of these waited.
    assert elapsed(started) < 5


def test_connection_errors_are_retried_until_the_gateway_is_back(
    daphne_server: LiveServer, gateway_url: str, agent_token: str
) -> None:
    from tests.external.conftest import Later

    daphne_server.stop()
    try:
        slept: list[float] = []

        def sleep(seconds: float) -> None:
            slept.append(seconds)
            time.sleep(seconds)

        gw = Gateway(
            gateway_url,
            agent_token,
            agent="payments-bot",
            retry=Retry(attempts=60, backoff=0.1, max_backoff=0.5),
            sleep=sleep,
        )
        later = Later(lambda: gw.raise_request("pay", {"amount": 1}))
        wait_for(lambda: len(slept) >= 2, what="the client to retry")
    finally:
        daphne_server.start()
    made = later.result()
    assert made.pending and Suspension.objects.filter(pk=made.id).exists()
    assert Suspension.objects.count() == 1


@pytest.fixture(scope="module")
def limited_server(django_db_setup: Any, django_db_blocker: Any, tmp_path_factory: Any) -> Any:
    """A second daphne whose run limit is two a second."""

    class Limited(LiveServer):
        def env(self) -> dict[str, str]:
            return {**super().env(), "RATE_LIMIT_RUNS": "2/second"}

    with django_db_blocker.unblock():
        server = Limited(Path(tmp_path_factory.mktemp("limited")))
        server.start()
    yield server
    server.stop()


def test_429_waits_as_retry_after_says(
    limited_server: LiveServer, transactional_db: Any, agent_token: str
) -> None:
    slept: list[float] = []

    def sleep(seconds: float) -> None:
        slept.append(seconds)
        time.sleep(seconds)

    with Gateway(limited_server.url, agent_token, agent="payments-bot", sleep=sleep) as gw:
        made = [gw.raise_request("pay", {"amount": n}) for n in range(5)]
    assert len({m.id for m in made}) == 5 and Suspension.objects.count() == 5
    # At two a second, five raises met the limit at least once, and waited no longer than
    # the Retry-After the gateway sent (whole seconds, at most one at this rate).
    assert slept and all(0 <= s <= 1 for s in slept)
