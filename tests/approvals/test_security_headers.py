"""Every page carries a Content-Security-Policy that allows no inline script, and needs none."""

from html.parser import HTMLParser
from typing import Any

import pytest
from django.test import Client

from tests.approvals import state


def policy(r: Any) -> dict[str, list[str]]:
    header = r.headers.get("Content-Security-Policy")
    assert header, f"no Content-Security-Policy on {r.request['PATH_INFO']}"
    directives = {}
    for part in header.split(";"):
        name, *values = part.split()
        directives[name] = values
    return directives


class InlineCode(HTMLParser):
    """What a policy without 'unsafe-inline' would block: inline scripts, on* handlers, style
    attributes and <style> blocks, and javascript: URLs."""

    def __init__(self) -> None:
        super().__init__()
        self.found: list[str] = []
        self.in_script = False

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        named = dict(attrs)
        if tag == "script" and "src" not in named and named.get("type") != "application/json":
            self.found.append(f"inline <script> {named}")
        if tag == "style":
            self.found.append("<style> block")
        for name, value in attrs:
            if name.startswith("on"):
                self.found.append(f"<{tag} {name}=...>")
            if name == "style":
                self.found.append(f"<{tag} style={value!r}>")
            script_url = (value or "").lower().startswith("javascript:")
            if name in ("href", "src", "action") and script_url:
                self.found.append(f"<{tag} {name}={value!r}>")


def inline_code(html: str) -> list[str]:
    parser = InlineCode()
    parser.feed(html)
    return parser.found


class SecurityHeadersTestCase:
    @pytest.fixture(autouse=True)
    def setup(self, users: dict[str, Any]) -> None:
        self.users = users
        self.thread, [self.s] = state.suspended(users["operator"])
        self.admin = Client()
        self.admin.force_login(users["admin"])

    def pages(self) -> list[tuple[Client, str]]:
        anonymous = Client()
        return [
            (anonymous, "/login/"),
            (anonymous, "/admin/login/"),
            (self.admin, "/"),
            (self.admin, f"/threads/{self.thread.pk}/"),
            (self.admin, "/runs/new/"),
            (self.admin, "/audit/"),
            (self.admin, "/admin/"),
            (self.admin, "/admin/agents/thread/"),
            (self.admin, f"/admin/agents/thread/{self.thread.pk}/change/"),
            (self.admin, f"/admin/agents/suspension/{self.s.pk}/change/"),
            (self.admin, "/admin/agents/agentdefinition/add/"),
            (self.admin, "/admin/auth/user/add/"),
            (self.admin, "/threads/no-such-thread/"),
        ]

    def test_every_page_has_a_policy_without_inline_script(self) -> None:
        for client, path in self.pages():
            r = client.get(path)
            assert r.status_code in (200, 404), (path, r.status_code)
            p = policy(r)
            assert p["script-src"] == ["'self'"], (path, p)
            for directive in ("default-src", "script-src", "style-src"):
                assert "'unsafe-inline'" not in p[directive], (path, directive)
                assert "'unsafe-eval'" not in p[directive], (path, directive)
            assert p["default-src"] == ["'self'"] and p["frame-ancestors"] == ["'none'"]
            assert p["base-uri"] == ["'self'"] and p["form-action"] == ["'self'"]
            assert p["img-src"] == ["'self'", "data:"]

    def test_the_socket_may_connect(self) -> None:
        p = policy(self.admin.get("/"))
        assert "'self'" in p["connect-src"]
        assert any(src.startswith("ws://") for src in p["connect-src"])
        assert any(src.startswith("wss://") for src in p["connect-src"])

    def test_no_page_needs_inline_code(self) -> None:
        for client, path in self.pages():
            r = client.get(path)
            assert inline_code(r.content.decode()) == [], path

    def test_the_api_answers_carry_the_policy_too(self, api: Any) -> None:
        r = api("reviewer").get("/api/suspensions")
        assert r.status_code == 200
        assert policy(r)["default-src"] == ["'self'"]

    def test_pages_may_not_be_framed_or_sniffed(self) -> None:
        r = self.admin.get("/")
        assert r.headers["X-Frame-Options"] == "DENY"
        assert r.headers["X-Content-Type-Options"] == "nosniff"
        assert r.headers["Referrer-Policy"] == "same-origin"
