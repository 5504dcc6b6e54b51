"""Unknown /api/ URLs, and a server failure under /api/, answer JSON, not an HTML page."""

import json
from typing import Any

import pytest
from django.test import Client, RequestFactory
from django.urls import get_resolver


class ApiNotFoundTestCase:
    @pytest.mark.parametrize(
        "path",
        [
            "/api/",
            "/api/nothing",
            "/api/threads/",
            "/api/suspensions/abc/def",
            "/api/threads/abc/suspensions/def",
            "/api/threads/abc/suspensions/def/resume/again",
        ],
    )
    def test_an_unknown_api_url_is_a_json_404(self, api: Any, path: str) -> None:
        for client in (api("reviewer"), api(None)):
            r = client.get(path)
            assert r.status_code == 404, path
            assert r["Content-Type"] == "application/json"
            assert r.json()["error"] == "not_found" and r.json()["detail"]

    def test_an_unknown_page_is_not_json(self, db: Any) -> None:
        r = Client().get("/no-such-page")
        assert r.status_code == 404
        assert r["Content-Type"].startswith("text/html")


class ApiServerErrorTestCase:
    def test_a_server_failure_under_api_answers_json(self) -> None:
        handler = get_resolver().resolve_error_handler(500)
        r = handler(RequestFactory().post("/api/threads"))
        assert r.status_code == 500
        assert r["Content-Type"] == "application/json"
        assert json.loads(r.content)["error"] == "server_error"

    def test_a_server_failure_on_a_page_is_not_json(self) -> None:
        handler = get_resolver().resolve_error_handler(500)
        r = handler(RequestFactory().get("/inbox/"))
        assert r.status_code == 500 and r["Content-Type"].startswith("text/html")
