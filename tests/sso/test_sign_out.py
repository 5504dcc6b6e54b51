"""Signing out ends the gateway session, then sends a person who signed in through the provider
to its end-session endpoint (with their ID token as the hint, and the login page to come back
to), when the provider's discovery document offers one."""

from typing import Any
from urllib.parse import parse_qs, urlsplit

from django.test import Client

from tests.sso.provider import CLIENT_ID


def test_sign_out_ends_the_session_and_then_the_providers(
    db: Any, provider: Any, sign_in: Any
) -> None:
    provider.add("dana", groups=["reviewers"])
    client = Client()
    sign_in(client, "dana")
    id_token = client.session["sso_id_token"]

    answer = client.post("/logout/")
    assert answer.status_code == 302
    to = urlsplit(answer["Location"])
    assert f"{to.scheme}://{to.netloc}{to.path}" == f"{provider.url}/logout"
    query = parse_qs(to.query)
    assert query["id_token_hint"] == [id_token]
    assert query["client_id"] == [CLIENT_ID]
    assert query["post_logout_redirect_uri"] == ["http://localhost:8000/login/"]
    # The gateway's session is over.
    assert "_auth_user_id" not in client.session
    assert client.get("/")["Location"].startswith("/login/")


def test_without_an_end_session_endpoint_sign_out_goes_to_the_login_page(
    db: Any, provider: Any, sign_in: Any
) -> None:
    provider.add("dana", groups=["reviewers"])
    provider.end_session = False
    client = Client()
    sign_in(client, "dana")
    answer = client.post("/logout/")
    assert answer.status_code == 302 and answer["Location"] == "/login/"
    assert "_auth_user_id" not in client.session


def test_a_password_user_signs_out_to_the_login_page(provider: Any, users: Any) -> None:
    client = Client()
    client.force_login(users["reviewer"])
    answer = client.post("/logout/")
    assert answer.status_code == 302 and answer["Location"] == "/login/"
    assert provider.logouts == []


def test_sign_out_takes_a_post_only(provider: Any, users: Any) -> None:
    client = Client()
    client.force_login(users["reviewer"])
    assert client.get("/logout/").status_code == 405
    assert "_auth_user_id" in client.session
