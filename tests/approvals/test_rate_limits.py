"""Limits on abuse over REST: starting runs and deciding are rate limited per token and per user
(429 with Retry-After, others unaffected), and an agent with MAX_PENDING_PER_AGENT requests
waiting starts no more runs, also when many starts come at once."""

import json
import threading
import time
from typing import Any

import pytest
from django.contrib.auth.models import Group, User
from django.db import connection
from django.test import Client

from access import ratelimits
from access.models import ApiToken
from access.permissions import REVIEWERS
from agents.models import Suspension, Thread
from tests.approvals import state


def client_of(user: Any) -> Client:
    _, raw = ApiToken.issue(user, "limits")
    return Client(headers={"Authorization": f"Bearer {raw}"})


def start(client: Client, agent: str = "payer") -> Any:
    body = json.dumps({"agent": agent, "message": "Pay invoice 12"})
    return client.post("/api/threads", body, content_type="application/json")


def decide(client: Client, s: Suspension) -> Any:
    body = json.dumps({"approved": False, "reason": "not now"})
    return client.post(state.resume_url(s), body, content_type="application/json")


def assert_too_many(r: Any, code: str, longest: int) -> int:
    assert r.status_code == 429, r.content
    assert r["Content-Type"] == "application/json"
    wait = int(r["Retry-After"])
    assert 1 <= wait <= longest
    body = r.json()
    assert body["error"] == code and body["detail"] and body["retry_after"] == wait
    return wait


@pytest.fixture(autouse=True)
def fresh_counters(db: Any) -> None:
    """Redis keeps counters between tests (the database's are rolled back with the test)."""
    ratelimits.storage().reset()


class RunRateTestCase:
    @pytest.fixture(autouse=True)
    def setup(self, users: dict[str, Any], settings: Any) -> None:
        self.users = users
        state.agent("payer")
        self.settings = settings

    def test_a_flood_from_one_token_is_refused_while_others_keep_working(self) -> None:
        self.settings.RATE_LIMIT_RUNS = "5/minute"
        self.settings.RATE_LIMIT_USER_RUNS = "100/minute"
        flood = client_of(self.users["reviewer"])
        answers = [start(flood) for _ in range(12)]
        assert [r.status_code for r in answers[:5]] == [201] * 5
        for r in answers[5:]:
            assert_too_many(r, "rate_limited", 60)
        assert "This token" in answers[-1].json()["detail"]
        assert Thread.objects.filter(created_by=self.users["reviewer"]).count() == 5
        # Another user, and another token of the same user, are not held up.
        assert start(client_of(self.users["teammate"])).status_code == 201
        assert start(client_of(self.users["reviewer"])).status_code == 201

    def test_the_user_limit_spans_all_their_tokens_and_their_session(self) -> None:
        self.settings.RATE_LIMIT_RUNS = "100/minute"
        self.settings.RATE_LIMIT_USER_RUNS = "3/minute"
        alice = self.users["reviewer"]
        one, two = client_of(alice), client_of(alice)
        assert [start(one).status_code, start(two).status_code, start(one).status_code] == [
            201,
            201,
            201,
        ]
        assert_too_many(start(two), "rate_limited", 60)
        browser = Client(enforce_csrf_checks=False)
        browser.force_login(alice)
        r = assert_too_many(start(browser), "rate_limited", 60)
        assert r and Thread.objects.filter(created_by=alice).count() == 3
        assert start(client_of(self.users["teammate"])).status_code == 201

    def test_the_new_run_page_counts_against_the_same_user(self) -> None:
        self.settings.RATE_LIMIT_USER_RUNS = "2/minute"
        alice = self.users["reviewer"]
        assert start(client_of(alice)).status_code == 201
        browser = Client()
        browser.force_login(alice)
        form = {"agent": "payer", "message": "Pay invoice 13"}
        assert browser.post("/runs/new/", form).status_code == 302
        refused = browser.post("/runs/new/", form)
        assert refused.status_code == 429 and 1 <= int(refused["Retry-After"]) <= 60
        assert "at most 2 times per minute" in refused.content.decode()
        assert Thread.objects.filter(created_by=alice).count() == 2

    def test_the_window_passes_after_retry_after(self) -> None:
        self.settings.RATE_LIMIT_RUNS = "2/2 seconds"
        client = client_of(self.users["reviewer"])
        assert [start(client).status_code for _ in range(2)] == [201, 201]
        wait = assert_too_many(start(client), "rate_limited", 2)
        time.sleep(wait + 0.2)
        assert start(client).status_code == 201

    def test_an_empty_setting_means_no_limit(self) -> None:
        self.settings.RATE_LIMIT_RUNS = ""
        self.settings.RATE_LIMIT_USER_RUNS = ""
        client = client_of(self.users["reviewer"])
        assert {start(client).status_code for _ in range(30)} == {201}


class DecisionRateTestCase:
    def test_deciding_is_limited_likewise(self, users: dict[str, Any], settings: Any) -> None:
        settings.RATE_LIMIT_DECISIONS = "3/minute"
        settings.RATE_LIMIT_USER_DECISIONS = "100/minute"
        carol = User.objects.create_user("carol")
        carol.groups.add(Group.objects.get(name=REVIEWERS))
        made = [state.suspended(users["teammate"])[1][0] for _ in range(5)]
        alice = client_of(users["reviewer"])
        assert [decide(alice, s).status_code for s in made[:3]] == [202] * 3
        assert_too_many(decide(alice, made[3]), "rate_limited", 60)
        made[3].refresh_from_db()
        assert made[3].status == Suspension.Status.PENDING
        # Someone else decides on.
        assert decide(client_of(carol), made[3]).status_code == 202
        made[3].refresh_from_db()
        assert made[3].status == Suspension.Status.REJECTED and made[3].decided_by == carol


class PendingCapTestCase:
    @pytest.fixture(autouse=True)
    def setup(self, users: dict[str, Any], settings: Any) -> None:
        self.users = users
        settings.MAX_PENDING_PER_AGENT = 3
        state.agent("helpdesk")

    def test_an_agent_at_its_cap_starts_no_more_runs(self) -> None:
        bob = self.users["teammate"]
        _, [first] = state.suspended(bob)
        state.suspended(bob)
        alice = client_of(self.users["reviewer"])
        started = start(alice)
        assert started.status_code == 201  # two pending, and this run may ask: three
        r = start(alice)
        wait = assert_too_many(r, "too_many_pending", 30)
        assert "payer" in r.json()["detail"] and wait >= 1
        assert Thread.objects.filter(agent__name="payer").count() == 3
        # Another agent is not held up. A decision leaves the run working (it may ask again);
        # a run that ends frees its place.
        assert start(alice, "helpdesk").status_code == 201
        assert decide(alice, first).status_code == 202
        assert_too_many(start(alice), "too_many_pending", 30)
        cancel = f"/api/threads/{started.json()['id']}/cancel"
        assert alice.post(cancel, "{}", content_type="application/json").status_code == 200
        assert start(alice).status_code == 201
        assert_too_many(start(alice), "too_many_pending", 30)

    def test_retry_after_is_the_soonest_deadline_when_it_comes_first(self) -> None:
        bob = self.users["teammate"]
        for _ in range(3):
            state.suspended(bob, expires_in=8)
        assert_too_many(start(client_of(self.users["reviewer"])), "too_many_pending", 9)


@pytest.mark.django_db(transaction=True)
class ConcurrentStartsTestCase:
    def test_parallel_starts_never_exceed_the_cap(
        self, users: dict[str, Any], settings: Any
    ) -> None:
        settings.MAX_PENDING_PER_AGENT = 4
        state.agent("payer")
        state.suspended(users["teammate"])  # one place taken already
        people = [User.objects.create_user(f"op{i}") for i in range(12)]
        adders = Group.objects.get(name=REVIEWERS)
        for person in people:
            person.groups.add(adders)
        clients = [client_of(person) for person in people]
        barrier = threading.Barrier(len(clients))
        codes: list[int] = []

        def go(client: Client) -> None:
            try:
                barrier.wait()
                codes.append(start(client).status_code)
            finally:
                connection.close()

        threads = [threading.Thread(target=go, args=(c,)) for c in clients]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        assert sorted(codes) == [201] * 3 + [429] * 9, codes
        assert Thread.objects.filter(agent__name="payer").count() == 4


@pytest.mark.django_db
def test_no_limit_set_counts_nothing(users: dict[str, Any], settings: Any) -> None:
    """With the limits off (empty rates), starting runs touches no counter store at all: a
    store that cannot be reached does not matter, and the first requests of a fresh process
    never race to set one up."""
    settings.RATE_LIMIT_RUNS = settings.RATE_LIMIT_USER_RUNS = ""
    settings.REDIS_URL = "redis://127.0.0.1:9/0"  # nothing listens on port 9
    ratelimits._storage.cache_clear()
    try:
        ratelimits.hit(ratelimits.RUNS, users["reviewer"])
        assert ratelimits._storage.cache_info().currsize == 0
    finally:
        ratelimits._storage.cache_clear()
