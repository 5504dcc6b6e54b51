"""Unknown /api/ URLs answer with a JSON 404, not an HTML page."""

from typing import Any

import pytest
from django.test import Client


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
