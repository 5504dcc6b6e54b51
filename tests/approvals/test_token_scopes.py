"""Token scopes over REST: each scope opens its endpoints and no others; a runs-only token sees
only the runs its user started; a missing scope is a 403 naming it; sessions are not scoped."""

import json
from typing import Any

import pytest
from django.db import connection
from django.db.migrations.loader import MigrationLoader
from django.test import Client

from access.models import ALL_SCOPES, ApiToken
from agents.models import Suspension, Thread
from tests.approvals import state


class Caller:
    """A client holding a token of `user` with exactly `scopes`."""

    def __init__(self, user: Any, *scopes: str) -> None:
        self.token, raw = ApiToken.issue(user, "scoped", list(scopes))
        self.client = Client(headers={"Authorization": f"Bearer {raw}"})

    def get(self, path: str, **params: Any) -> Any:
        return self.client.get(path, params)

    def post(self, path: str, data: Any = None) -> Any:
        return self.client.post(path, json.dumps(data or {}), content_type="application/json")


def assert_needs(r: Any, scope: str) -> None:
    assert r.status_code == 403, r.content
    body = r.json()
    assert body["error"] == "insufficient_scope"
    assert body["scope"] == scope and scope in body["detail"]
    assert r["WWW-Authenticate"].startswith('Bearer error="insufficient_scope"')


def ids(r: Any, key: str = "results") -> set[str]:
    assert r.status_code == 200, r.content
    return {str(item["id"]) for item in r.json()[key]}


class TokenScopesTestCase:
    @pytest.fixture(autouse=True)
    def setup(self, users: dict[str, Any]) -> None:
        self.users = users
        self.alice, self.bob = users["reviewer"], users["teammate"]
        # Alice's run and Bob's run, each waiting for a decision.
        self.mine, [self.my_s] = state.suspended(self.alice)
        self.theirs, [self.their_s] = state.suspended(self.bob)

    def test_runs_starts_runs_and_reads_only_its_users_own(self) -> None:
        alice = Caller(self.alice, "runs")
        r = alice.post("/api/threads", {"agent": "payer", "message": "Pay invoice 7"})
        assert r.status_code == 201, r.content
        started = r.json()["id"]
        assert ids(alice.get("/api/threads")) == {str(self.mine.pk), started}
        assert alice.get(f"/api/threads/{self.mine.pk}").status_code == 200
        assert_needs(alice.get(f"/api/threads/{self.theirs.pk}"), "read")
        assert ids(alice.get("/api/suspensions")) == {str(self.my_s.pk)}
        assert_needs(alice.get(f"/api/suspensions/{self.their_s.pk}"), "read")
        events = alice.get("/api/events").json()["events"]
        assert events and {e["thread"] for e in events} == {str(self.mine.pk), started}
        theirs = self.theirs.events.first()
        assert_needs(alice.get(f"/api/events/{theirs.pk}"), "read")
        # Deciding needs decide, even on its own run; steering another's run needs decide too.
        assert_needs(alice.post(state.resume_url(self.their_s), {"approved": True}), "decide")
        assert_needs(alice.post(f"/api/threads/{self.theirs.pk}/cancel"), "decide")
        assert alice.post(f"/api/threads/{self.mine.pk}/cancel").status_code == 200
        self.their_s.refresh_from_db()
        assert self.their_s.status == Suspension.Status.PENDING

    def test_read_reads_everything_and_changes_nothing(self) -> None:
        alice = Caller(self.alice, "read")
        assert ids(alice.get("/api/threads")) == {str(self.mine.pk), str(self.theirs.pk)}
        assert alice.get(f"/api/threads/{self.theirs.pk}").status_code == 200
        assert ids(alice.get("/api/suspensions")) == {str(self.my_s.pk), str(self.their_s.pk)}
        assert len(alice.get("/api/events").json()["events"]) == 2
        assert_needs(alice.post("/api/threads", {"agent": "payer", "message": "go"}), "runs")
        assert_needs(alice.post(state.resume_url(self.their_s), {"approved": True}), "decide")
        assert_needs(alice.post(f"/api/threads/{self.theirs.pk}/cancel"), "runs or decide")
        extend = f"/api/threads/{self.theirs.pk}/suspensions/{self.their_s.pk}/extend"
        assert_needs(alice.post(extend, {"seconds": 60, "reason": "later"}), "decide")
        assert Thread.objects.count() == 2
        assert Suspension.objects.filter(status=Suspension.Status.PENDING).count() == 2

    def test_decide_decides_and_sees_what_waits_but_reads_no_runs(self) -> None:
        alice = Caller(self.alice, "decide")
        assert ids(alice.get("/api/suspensions")) == {str(self.my_s.pk), str(self.their_s.pk)}
        assert alice.get(f"/api/suspensions/{self.their_s.pk}").status_code == 200
        extend = f"/api/threads/{self.theirs.pk}/suspensions/{self.their_s.pk}/extend"
        assert alice.post(extend, {"seconds": 60, "reason": "later"}).status_code == 200
        r = alice.post(state.resume_url(self.their_s), {"approved": True})
        assert r.status_code == 202, r.content
        self.their_s.refresh_from_db()
        assert self.their_s.status == Suspension.Status.APPROVED
        assert self.their_s.decided_by == self.alice
        assert_needs(alice.get("/api/threads"), "read or runs")
        assert_needs(alice.get(f"/api/threads/{self.theirs.pk}"), "read or runs")
        assert_needs(alice.get("/api/events"), "read or runs")
        assert_needs(alice.post("/api/threads", {"agent": "payer", "message": "go"}), "runs")

    def test_admin_is_needed_for_the_staff_apis(self) -> None:
        admin = self.users["admin"]
        everything_else = Caller(admin, "runs", "decide", "read")
        assert_needs(everything_else.get("/api/webhooks"), "admin")
        assert_needs(everything_else.get("/api/metrics/conversations"), "admin")
        staff = Caller(admin, "admin")
        assert staff.get("/api/webhooks").status_code == 200
        assert staff.get("/api/metrics/conversations").status_code == 200
        assert_needs(staff.get("/api/threads"), "read or runs")

    def test_scopes_add_to_the_users_permissions_never_beyond(self) -> None:
        outsider = Caller(self.users["outsider"], *ALL_SCOPES)
        assert outsider.get("/api/threads").status_code == 403
        assert outsider.post(state.resume_url(self.their_s), {"approved": True}).status_code == 403
        self.their_s.refresh_from_db()
        assert self.their_s.status == Suspension.Status.PENDING

    def test_a_session_is_not_scoped(self) -> None:
        browser = Client()
        browser.force_login(self.alice)
        assert ids(browser.get("/api/threads")) == {str(self.mine.pk), str(self.theirs.pk)}
        assert browser.get("/api/suspensions").status_code == 200
        assert browser.get("/api/events").status_code == 200

    def test_a_token_without_scopes_named_has_them_all(self) -> None:
        token, _ = ApiToken.issue(self.alice, "plain")
        assert sorted(token.scopes) == sorted(ALL_SCOPES)

    def test_tokens_made_before_scopes_keep_every_scope(self) -> None:
        migration = __import__(
            "approvals.migrations.0002_scopes_expiry_revocation_rate_counters",
            fromlist=["every_scope"],
        )
        old, _ = ApiToken.issue(self.alice, "old", [])
        # The models as that migration saw them (the tokens were the approvals app's then).
        then = MigrationLoader(connection).project_state(
            ("approvals", "0002_scopes_expiry_revocation_rate_counters")
        )
        migration.every_scope(then.apps, None)
        old.refresh_from_db()
        assert sorted(old.scopes) == sorted(ALL_SCOPES)
