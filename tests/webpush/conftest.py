"""Web Push tests: the push-service stand-in, and the settings that let the gateway send to
it (a loopback host named in WEBPUSH_PUSH_SERVICES; the server and the worker the browser
test starts read it from the environment)."""

import os
from collections.abc import Iterator
from typing import Any

import pytest

# The browser test's live server, Chromium and logged-in site (tests/e2e).
from tests.e2e.conftest import (  # noqa: F401
    browser,
    daphne_server,
    site,
)
from tests.webpush.standin import PushService

os.environ.setdefault("WEBPUSH_PUSH_SERVICES", "127.0.0.1")


@pytest.fixture(scope="session")
def push_service() -> Iterator[PushService]:
    service = PushService().start()
    yield service
    service.stop()


@pytest.fixture
def push(push_service: PushService, settings: Any) -> PushService:
    """The stand-in, emptied, and this process allowed to send to it."""
    settings.WEBPUSH_PUSH_SERVICES = ["127.0.0.1"]
    push_service.subscriptions.clear()
    push_service.answers.clear()
    push_service.received.clear()
    push_service.refused.clear()
    return push_service
