"""Every page a person opens has its own title and the favicon, error pages included."""

import re
from typing import Any

import pytest
from django.test import Client, RequestFactory
from django.urls import get_resolver


def title_and_icon(html: str) -> tuple[str, bool]:
    match = re.search(r"<title>(.*?)</title>", html, re.S)
    assert match, "the page has no title"
    return match.group(1).strip(), '<link rel="icon" href="/static/favicon.svg"' in html


class PageTitleTestCase:
    @pytest.fixture(autouse=True)
    def setup(self, users: dict[str, Any]) -> None:
        self.users = users

    def test_each_page_names_itself_and_carries_the_icon(self) -> None:
        staff = Client()
        staff.force_login(self.users["admin"])
        pages = {
            "/": "(0) Inbox · Approval gateway",
            "/runs/new/": "New run · Approval gateway",
            "/audit/": "Audit trail · Approval gateway",
            "/email/": "Email · Approval gateway",
            "/account/": "Account · Approval gateway",
            "/grants/": "Grants · Approval gateway",
            "/no-such-page": "Not found · Approval gateway",
        }
        for path, title in pages.items():
            assert title_and_icon(staff.get(path).content.decode()) == (title, True), path
        login = Client().get("/login/").content.decode()
        assert title_and_icon(login) == ("Log in · Approval gateway", True)
        outsider = Client()
        outsider.force_login(self.users["outsider"])
        denied = outsider.get("/audit/")
        assert denied.status_code == 403
        assert title_and_icon(denied.content.decode()) == ("Not allowed · Approval gateway", True)

    def test_a_server_error_page_names_itself(self) -> None:
        r = get_resolver().resolve_error_handler(500)(RequestFactory().get("/"))
        assert r.status_code == 500
        assert title_and_icon(r.content.decode()) == ("Server error · Approval gateway", True)

    def test_favicon_ico_leads_to_the_icon(self) -> None:
        r = Client().get("/favicon.ico")
        assert r.status_code == 301 and r["Location"] == "/static/favicon.svg"
