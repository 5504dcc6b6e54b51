"""Every way a provider's answer can be wrong ends on a page that says why, signs no one in and
makes no user: a forged or expired ID token, a nonce, state or audience that is not this
sign-in's, an unverified email, an error from the provider, a provider that is down."""

import time
from typing import Any
from urllib.parse import urlencode, urlsplit

import pytest
from django.contrib.auth.models import User
from django.test import Client

from tests.sso.conftest import follow_back


def refused(answer: Any, status: int, words: str) -> None:
    page = answer.content.decode()
    assert answer.status_code == status, page
    assert words in page, page
    assert 'href="/login/"' in page  # the way back


@pytest.fixture
def dana(provider: Any) -> None:
    provider.add("dana", email="dana@example.com", email_verified=True, groups=["reviewers"])


@pytest.fixture
def nobody_signed_in(db: Any) -> Any:
    yield
    assert not User.objects.filter(identities__isnull=False).exists()


@pytest.mark.parametrize(
    "tamper, words",
    [
        ({"exp": int(time.time()) - 600, "iat": int(time.time()) - 900}, "it has expired"),
        ({"nonce": "not-this-sign-in"}, "its nonce does not match"),
        ({"aud": "another-app"}, "its audience is not this gateway"),
        # authlib alone would take this one (it checks the audience only through azp).
        ({"aud": ["another-app"], "azp": "gateway"}, "its audience is not this gateway"),
        ({"iss": "https://evil.example"}, "its issuer"),
    ],
    ids=["expired", "nonce", "audience", "audience-with-azp", "issuer"],
)
def test_an_id_token_that_is_not_for_this_sign_in_is_refused(
    provider: Any, sign_in: Any, dana: None, nobody_signed_in: None, tamper: Any, words: str
) -> None:
    provider.tamper = tamper
    client = Client()
    refused(sign_in(client, "dana"), 403, words)
    assert "_auth_user_id" not in client.session


def test_a_forged_signature_is_refused(
    provider: Any, sign_in: Any, dana: None, nobody_signed_in: None
) -> None:
    provider.forge = True
    refused(sign_in(Client(), "dana"), 403, "its signature does not match")


def test_an_unverified_email_is_refused(
    provider: Any, sign_in: Any, nobody_signed_in: None
) -> None:
    provider.add("mallory", email="ceo@example.com", email_verified=False)
    refused(sign_in(Client(), "mallory"), 403, "has not verified your email address")
    provider.add("mallory", email="ceo@example.com")  # no email_verified at all
    refused(sign_in(Client(), "mallory"), 403, "has not verified your email address")


def test_a_state_not_started_in_this_browser_is_refused(
    provider: Any, dana: None, nobody_signed_in: None
) -> None:
    client = Client()
    started = client.get("/sso/start")
    back = urlsplit(provider.approve(started["Location"], "dana"))
    code = dict(p.split("=", 1) for p in back.query.split("&"))["code"]
    wrong = client.get(back.path, {"code": code, "state": "forged-state"})
    refused(wrong, 403, "its state does not match")
    # Another browser, with the provider's genuine answer: not its sign-in either.
    refused(Client().get(f"{back.path}?{back.query}"), 403, "This sign-in was not started here")


def test_a_callback_used_twice_is_refused_the_second_time(
    provider: Any, dana: None, db: Any
) -> None:
    client = Client()
    back = provider.approve(client.get("/sso/start")["Location"], "dana")
    assert follow_back(client, back).status_code == 302
    refused(follow_back(client, back), 403, "it was used already")


def test_an_error_from_the_provider_is_shown(provider: Any, nobody_signed_in: None) -> None:
    client = Client()
    client.get("/sso/start")
    [state] = [k.removeprefix("_state_oidc_") for k in client.session.keys() if "_state_" in k]
    answer = client.get(
        "/sso/callback?"
        + urlencode({"error": "access_denied", "error_description": "Not assigned", "state": state})
    )
    refused(answer, 403, "It answered &#x27;access_denied&#x27;: Not assigned")


def test_a_provider_that_is_down_is_said_so(provider: Any, db: Any) -> None:
    provider.stop()
    refused(Client().get("/sso/start"), 502, "could not reach your identity provider")


def test_a_discovery_document_of_another_issuer_is_refused(
    provider: Any, db: Any, settings: Any
) -> None:
    # The provider's documents, read through another name: they name another issuer.
    settings.OIDC_ISSUER = provider.url.replace("127.0.0.1", "localhost")
    refused(Client().get("/sso/start"), 502, "names the issuer")


def test_an_error_link_of_anyones_making_shows_no_words_of_theirs(provider: Any, db: Any) -> None:
    answer = Client().get(
        "/sso/callback?error=access_denied&error_description=Call+0800+to+unlock&state=made-up"
    )
    refused(answer, 403, "This sign-in was not started here")
    assert "0800" not in answer.content.decode()
