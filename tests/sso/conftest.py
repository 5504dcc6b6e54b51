"""The stand-in identity provider (tests.sso.provider), the gateway set up to use it, and a
sign-in through it as a browser would make one: to the provider, back with a code."""

from collections.abc import Callable, Iterator
from typing import Any
from urllib.parse import parse_qsl, urlsplit

import pytest
from django.test import Client

from tests.sso.provider import CLIENT_ID, CLIENT_SECRET, Provider


@pytest.fixture
def provider(settings: Any) -> Iterator[Provider]:
    """A provider of its own for the test, and the gateway's settings pointing at it."""
    stand_in = Provider().start()
    settings.OIDC_ISSUER = stand_in.url
    settings.OIDC_CLIENT_ID = CLIENT_ID
    settings.OIDC_CLIENT_SECRET = CLIENT_SECRET
    settings.OIDC_PROVIDER_NAME = "Stand-in ID"
    settings.OIDC_GROUPS_CLAIM = "groups"
    settings.OIDC_GROUP_MAP = {}
    yield stand_in
    stand_in.stop()


def follow_back(client: Client, back: str) -> Any:
    """The browser's request to the address the provider sent it back to."""
    parts = urlsplit(back)
    return client.get(parts.path, dict(parse_qsl(parts.query)))


@pytest.fixture
def sign_in(provider: Provider) -> Callable[..., Any]:
    """sign_in(client, login) goes from the gateway to the provider, signs in there as
    `login` and comes back; the gateway's answer to the callback."""

    def go(client: Client, login: str, next: str = "") -> Any:
        started = client.get("/sso/start", {"next": next} if next else {})
        assert started.status_code == 302, started.content
        assert started["Location"].startswith(f"{provider.url}/authorize?")
        return follow_back(client, provider.approve(started["Location"], login))

    return go
