"""Webhook fixtures: a real HTTP receiver on 127.0.0.1, and settings the worker shares.

The worker is a process of its own that reads its settings from the environment when it
starts, so the values webhook tests need are put in the environment here, at collection,
before any test starts the session's worker; the `webhook_settings` fixture gives this process
the same values.
"""

import os
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from tests.webhooks.receiver import Receiver

# Short enough for a test to watch every retry; 5 attempts in all, and a subscription is
# disabled after 2 dead letters in a row.
SCHEDULE = "0.2,0.2,0.2,0.2"
WORKER_ENV = {
    "WEBHOOKS_ALLOW_PRIVATE": "true",
    "WEBHOOKS_RETRY_SCHEDULE": SCHEDULE,
    "WEBHOOKS_DISABLE_AFTER": "2",
    "WEBHOOKS_TIMEOUT_SECONDS": "4",
    # A delivery's lease is this and 5 s: a killed worker's delivery is taken over soon.
    "WEBHOOKS_DELIVERY_TIMEOUT_SECONDS": "8",
    "WEBHOOKS_SWEEP_INTERVAL_SECONDS": "0.5",
}
for _name, _value in WORKER_ENV.items():
    os.environ.setdefault(_name, _value)


@pytest.fixture
def webhook_settings(settings: Any) -> Any:
    """This process's settings as the worker has them (WORKER_ENV)."""
    settings.WEBHOOKS_ALLOW_PRIVATE = True
    settings.WEBHOOKS_RETRY_SCHEDULE = [float(s) for s in SCHEDULE.split(",")]
    settings.WEBHOOKS_DISABLE_AFTER = 2
    settings.WEBHOOKS_TIMEOUT_SECONDS = 4
    settings.WEBHOOKS_DELIVERY_TIMEOUT_SECONDS = 8
    return settings


@pytest.fixture
def receiver() -> Iterator[Callable[..., Receiver]]:
    """receiver(secret=..., fail_first=0, sleep_first=0.0): a started receiver, stopped after
    the test."""
    made: list[Receiver] = []

    def start(**kwargs: Any) -> Receiver:
        r = Receiver(**kwargs)
        r.start()
        made.append(r)
        return r

    yield start
    for r in made:
        r.stop()
