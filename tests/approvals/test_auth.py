"""Who may call the API: bearer tokens, browser sessions with CSRF, and nobody else."""

from typing import Any

import pytest
from django.test import Client

from access.models import ApiToken
from agents.models import Event, Suspension, Thread
from tests.approvals import state

# Every endpoint of design.md's public contract: method, path template, a valid body.
ENDPOINTS = [
    ("GET", "/api/threads", None),
    ("POST", "/api/threads", {"agent": "payer", "message": "go"}),
    ("GET", "/api/threads/{thread}", None),
    ("POST", "/api/threads/{thread}/messages", {"text": "hello"}),
    ("POST", "/api/threads/{thread}/cancel", {}),
    ("GET", "/api/suspensions", None),
    ("GET", "/api/suspensions/{suspension}", None),
    ("POST", "/api/threads/{thread}/suspensions/{suspension}/resume", {"approved": True}),
    ("GET", "/api/events", None),
]
IDS = [f"{method} {path}" for method, path, _ in ENDPOINTS]
WRITES = [e for e in ENDPOINTS if e[0] == "POST"]
# What each write answers once let through, on a suspended thread (a message needs a thread
# waiting for input, so 409 there still proves the call got past authentication).
ACCEPTED = {
    "/api/threads": 201,
    "/api/threads/{thread}/messages": 409,
    "/api/threads/{thread}/cancel": 200,
    "/api/threads/{thread}/suspensions/{suspension}/resume": 202,
}


def call(client: Client, method: str, path: str, body: Any, **headers: str) -> Any:
    if method == "GET":
        return client.get(path, headers=headers)
    return client.post(path, body, content_type="application/json", headers=headers)


class AuthTestCase:
    @pytest.fixture(autouse=True)
    def setup(self, users: dict[str, Any]) -> None:
        self.users = users
        self.thread, [self.s] = state.suspended(users["operator"])

    def path(self, template: str) -> str:
        return template.format(thread=self.thread.pk, suspension=self.s.pk)

    def assert_nothing_changed(self) -> None:
        self.s.refresh_from_db()
        assert self.s.status == Suspension.Status.PENDING
        assert Thread.objects.count() == 1
        assert Thread.objects.get().status == Thread.Status.SUSPENDED
        assert list(Event.objects.values_list("type", flat=True)) == ["AGENT_SUSPENDED"]

    @pytest.mark.parametrize("method, template, body", ENDPOINTS, ids=IDS)
    def test_an_anonymous_caller_gets_a_json_401(
        self, method: str, template: str, body: Any
    ) -> None:
        r = call(Client(), method, self.path(template), body)
        assert r.status_code == 401
        assert r["Content-Type"] == "application/json"
        assert r.json()["error"] == "unauthenticated" and r.json()["detail"]
        assert r["WWW-Authenticate"].startswith("Bearer")
        self.assert_nothing_changed()

    @pytest.mark.parametrize("method, template, body", ENDPOINTS, ids=IDS)
    @pytest.mark.parametrize(
        "header",
        ["Bearer gw_not-a-real-token", "Bearer ", "Token gw_x", "Basic YWxpY2U6YWxpY2U="],
        ids=["unknown-token", "empty-token", "wrong-scheme", "basic"],
    )
    def test_a_bad_bearer_token_gets_a_json_401(
        self, method: str, template: str, body: Any, header: str
    ) -> None:
        r = call(Client(), method, self.path(template), body, Authorization=header)
        assert r.status_code == 401
        assert r.json()["error"] == "unauthenticated" and r.json()["detail"]
        self.assert_nothing_changed()

    @pytest.mark.parametrize("method, template, body", ENDPOINTS, ids=IDS)
    def test_an_outsider_gets_a_json_403(
        self, api: Any, method: str, template: str, body: Any
    ) -> None:
        outsider = api("outsider")
        r = call(outsider.client, method, self.path(template), body, **outsider.headers)
        assert r.status_code == 403
        assert r.json()["error"] == "forbidden" and r.json()["detail"]
        self.assert_nothing_changed()

    def test_a_bad_token_is_refused_even_with_a_good_session(self) -> None:
        client = Client()
        client.force_login(self.users["reviewer"])
        r = client.get("/api/suspensions", headers={"Authorization": "Bearer gw_wrong"})
        assert r.status_code == 401

    def test_a_deactivated_users_token_stops_working(self) -> None:
        _, raw = ApiToken.issue(self.users["reviewer"])
        auth = {"Authorization": f"Bearer {raw}"}
        assert Client().get("/api/suspensions", headers=auth).status_code == 200
        self.users["reviewer"].is_active = False
        self.users["reviewer"].save()
        assert Client().get("/api/suspensions", headers=auth).status_code == 401

    def test_a_token_records_when_it_was_last_used(self) -> None:
        token, raw = ApiToken.issue(self.users["reviewer"])
        assert token.last_used_at is None
        Client().get("/api/events", headers={"Authorization": f"Bearer {raw}"})
        token.refresh_from_db()
        assert token.last_used_at is not None

    def test_a_wrong_method_is_a_json_405(self, api: Any) -> None:
        alice = api("reviewer")
        r = alice.client.delete(f"/api/threads/{self.thread.pk}", headers=alice.headers)
        assert r.status_code == 405
        assert r.json()["error"] == "method_not_allowed" and r["Allow"] == "GET"
        assert alice.get(self.path("/api/threads/{thread}/cancel")).status_code == 405
        self.assert_nothing_changed()


class SessionTestCase:
    """Browsers log in with a session; their writes must carry the CSRF token."""

    @pytest.fixture(autouse=True)
    def setup(self, users: dict[str, Any]) -> None:
        self.users = users
        self.thread, [self.s] = state.suspended(users["operator"])
        self.url = state.resume_url(self.s)
        self.browser = Client(enforce_csrf_checks=True)
        login_page = self.browser.get("/login/")
        assert login_page.status_code == 200
        self.csrf = self.browser.cookies["csrftoken"].value
        r = self.browser.post(
            "/login/",
            {"username": "alice", "password": "alice-password-1", "csrfmiddlewaretoken": self.csrf},
        )
        assert r.status_code == 302, r.content
        # Logging in rotates the token.
        self.csrf = self.browser.cookies["csrftoken"].value

    def test_a_logged_in_browser_reads_the_api(self) -> None:
        r = self.browser.get(f"/api/threads/{self.thread.pk}")
        assert r.status_code == 200
        assert r.json()["status"] == "suspended"
        assert self.browser.get("/api/suspensions").json()["results"][0]["id"] == str(self.s.pk)

    def test_a_session_post_without_the_csrf_token_is_refused(self) -> None:
        r = self.browser.post(self.url, {"approved": True}, content_type="application/json")
        assert r.status_code == 403
        assert r.json()["error"] == "csrf_failed" and r.json()["detail"]
        r = self.browser.post(
            self.url,
            {"approved": True},
            content_type="application/json",
            headers={"X-CSRFToken": "x" * 32},
        )
        assert r.status_code == 403
        self.s.refresh_from_db()
        assert self.s.status == Suspension.Status.PENDING
        assert not Event.objects.filter(type="SUSPENSION_DECIDED").exists()

    @pytest.mark.parametrize("method, template, body", WRITES, ids=[p for _, p, _ in WRITES])
    def test_every_write_checks_the_csrf_token(self, method: str, template: str, body: Any) -> None:
        state.agent("payer")
        path = template.format(thread=self.thread.pk, suspension=self.s.pk)
        r = self.browser.post(path, body, content_type="application/json")
        assert r.status_code == 403 and r.json()["error"] == "csrf_failed"
        assert Thread.objects.count() == 1
        assert list(Event.objects.values_list("type", flat=True)) == ["AGENT_SUSPENDED"]
        r = self.browser.post(
            path, body, content_type="application/json", headers={"X-CSRFToken": self.csrf}
        )
        assert r.status_code == ACCEPTED[template], r.content

    def test_a_session_post_with_the_csrf_token_is_taken_as_the_session_user(self) -> None:
        r = self.browser.post(
            self.url,
            {"approved": True},
            content_type="application/json",
            headers={"X-CSRFToken": self.csrf},
        )
        assert r.status_code == 202, r.content
        self.s.refresh_from_db()
        assert self.s.decided_by == self.users["reviewer"]

    def test_after_logout_the_session_no_longer_works(self) -> None:
        self.browser.post("/logout/", {"csrfmiddlewaretoken": self.csrf})
        assert self.browser.get("/api/suspensions").status_code == 401

    def test_a_bearer_call_needs_no_csrf_token(self) -> None:
        _, raw = ApiToken.issue(self.users["teammate"])
        client = Client(enforce_csrf_checks=True)
        r = client.post(
            self.url,
            {"approved": False, "reason": "no"},
            content_type="application/json",
            headers={"Authorization": f"Bearer {raw}"},
        )
        assert r.status_code == 202, r.content
        self.s.refresh_from_db()
        assert self.s.decided_by == self.users["teammate"]

    def test_an_outsiders_session_is_forbidden(self) -> None:
        client = Client()
        client.force_login(self.users["outsider"])
        assert client.get("/api/suspensions").status_code == 403
