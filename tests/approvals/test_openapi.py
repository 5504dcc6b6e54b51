"""The OpenAPI document: valid OpenAPI 3.1, built from the code, and covering every API URL
and method, so an endpoint added without a description fails here.
(tests/e2e/test_openapi_contract.py calls every operation against a live server.)"""

import re
from typing import Any

import pytest
from django.http import HttpRequest, JsonResponse
from django.urls import path
from openapi_spec_validator import validate

from access.auth import api
from approvals import openapi


@pytest.fixture
def document(api: Any) -> dict[str, Any]:
    r = api("reviewer").get("/api/openapi.json")
    assert r.status_code == 200, r.content
    return r.json()


def test_the_served_document_is_valid_openapi_3_1(document: dict[str, Any]) -> None:
    validate(document)  # raises on an invalid document
    assert document["openapi"].startswith("3.1")
    resume = document["paths"]["/api/threads/{thread_id}/suspensions/{suspension_id}/resume"]
    body = resume["post"]["requestBody"]["content"]["application/json"]["schema"]
    assert body == {"$ref": "#/components/schemas/Resume"}
    fields = document["components"]["schemas"]["Resume"]["properties"]
    assert {"approved", "reason", "modifiedArgs", "response", "seen"} <= set(fields)
    assert document["components"]["schemas"]["Resume"]["additionalProperties"] is False
    # Statuses the view answers: its own, and the ones every call may get.
    assert {"202", "200", "400", "401", "403", "404", "409", "413", "429"} <= set(
        resume["post"]["responses"]
    )
    listing = document["paths"]["/api/threads"]["get"]
    params = {p["name"]: p for p in listing["parameters"]}
    assert set(params["status"]["schema"]["anyOf"][0]["enum"]) >= {"running", "suspended"}
    assert {"limit", "cursor", "waiting"} <= set(params)
    listing = document["paths"]["/api/suspensions"]["get"]
    params = {p["name"]: p for p in listing["parameters"]}
    assert {"status", "agent", "thread", "tool", "kind", "ignored", "limit", "cursor"} <= set(
        params
    )


def test_every_api_url_and_method_is_described(document: dict[str, Any]) -> None:
    assert openapi.undescribed() == []
    for route in openapi.api_routes():
        if getattr(route.view, "openapi_skip", False):
            continue
        assert route.path in document["paths"], route.path
        methods = getattr(route.view, "api_methods", None) or route.view.openapi.keys()
        assert {m.lower() for m in methods} == set(document["paths"][route.path]), route.path
    # And the converse: the document describes only routes that exist.
    assert set(document["paths"]) == {
        r.path for r in openapi.api_routes() if not getattr(r.view, "openapi_skip", False)
    }


@api(["GET", "POST"])
def _undescribed_view(request: HttpRequest, item_id: str) -> JsonResponse:
    return JsonResponse({})


@openapi.operation("GET", "Half described", responses={200: None})
@api(["GET", "DELETE"])
def _half_described_view(request: HttpRequest) -> JsonResponse:
    return JsonResponse({})


urlpatterns = [
    path("api/new/<str:item_id>", _undescribed_view),
    path("api/half", _half_described_view),
    path("not-api", _undescribed_view),
]


def test_a_new_endpoint_without_a_description_is_reported(settings: Any) -> None:
    settings.ROOT_URLCONF = __name__
    assert openapi.undescribed() == [
        "GET /api/new/{item_id}",
        "POST /api/new/{item_id}",
        "DELETE /api/half",
    ]
    doc = openapi.build()
    assert list(doc["paths"]) == ["/api/half"]
    assert list(doc["paths"]["/api/half"]) == ["get"]


def test_the_document_needs_a_caller(api: Any, client: Any) -> None:
    r = api(None).get("/api/openapi.json")
    assert r.status_code == 401 and r.json()["error"] == "unauthenticated"
    r = client.get("/api/docs")
    assert r.status_code == 302 and r["Location"].startswith("/login/?next=/api/docs")


def test_a_token_reads_the_document_and_the_page_wants_a_session(api: Any) -> None:
    """docs/api.md: the JSON takes a token; the page is a browser's, and sends a token's
    caller to the login page."""
    reviewer = api("reviewer")
    assert reviewer.get("/api/openapi.json").status_code == 200
    r = reviewer.get("/api/docs")
    assert r.status_code == 302 and r["Location"].startswith("/login/?next=/api/docs")


def test_the_description_says_what_the_api_is_for(document: dict[str, Any]) -> None:
    description = document["info"]["description"]
    for part in ("POST /api/requests", "?wait=", "/resume", "receipt", "jwks.json"):
        assert part in description, part


def test_the_docs_page_loads_the_vendored_viewer(client: Any, users: dict[str, Any]) -> None:
    client.force_login(users["reviewer"])
    r = client.get("/api/docs")
    assert r.status_code == 200
    html = r.content.decode()
    assert "/static/vendor/swagger-ui/swagger-ui-bundle.js" in html
    assert "/static/js/api-docs.js" in html and 'data-spec="/api/openapi.json"' in html
    assert "<script>" not in html  # no inline script: the CSP allows none
    # Everything the page loads comes from this server: no CDN. (Not a search for "cdn" in
    # the page, which a random CSRF token may contain.)
    loaded = re.findall(r'(?:src|href)="([^"]*)"', html)
    local = [u for u in loaded if u.startswith("#") or (u.startswith("/") and u[1:2] != "/")]
    assert loaded and local == loaded, loaded
