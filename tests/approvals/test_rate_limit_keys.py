"""The rate limits' counters in Redis belong to one gateway: their keys begin with its
GATEWAY_PREFIX (as its channel layer's do) and expire with their window, so two gateways, or
two test runs, on one Redis database never count each other's calls, and nothing is left
behind once the windows have passed; no test needs a flushed Redis."""

import uuid
from collections.abc import Iterator
from typing import Any

import pytest
import redis
from django.conf import settings as django_settings

from access import ratelimits

pytestmark = pytest.mark.skipif(
    not django_settings.REDIS_URL,
    reason="without Redis the counters are RateCounter rows, rolled back with each test "
    "(test_rate_limits runs on both setups)",
)


@pytest.fixture
def prefixes(settings: Any) -> Iterator[list[str]]:
    """Two gateways' prefixes, new for this test; their keys are removed after it."""
    made = [f"limits-{uuid.uuid4().hex[:8]}-{name}" for name in ("a", "b")]
    settings.RATE_LIMIT_RUNS = ""  # these calls come without a token: one window, the user's
    settings.RATE_LIMIT_USER_RUNS = "1/minute"
    yield made
    client = redis.Redis.from_url(django_settings.REDIS_URL)
    for prefix in made:
        for key in client.scan_iter(match=f"{prefix}*"):
            client.delete(key)


def test_a_counter_carries_the_gateways_prefix_and_expires_with_its_window(
    users: dict[str, Any], settings: Any, prefixes: list[str]
) -> None:
    settings.GATEWAY_PREFIX = prefixes[0]
    ratelimits.hit(ratelimits.RUNS, users["reviewer"])
    client = redis.Redis.from_url(settings.REDIS_URL)
    [key] = client.scan_iter(match=f"{prefixes[0]}*")
    assert f"runs/user/{users['reviewer'].pk}".encode() in key
    assert 0 < client.ttl(key) <= 60  # a minute's window


def test_two_gateways_on_one_redis_database_count_apart(
    users: dict[str, Any], settings: Any, prefixes: list[str]
) -> None:
    reviewer = users["reviewer"]
    settings.GATEWAY_PREFIX = prefixes[0]
    ratelimits.hit(ratelimits.RUNS, reviewer)
    with pytest.raises(ratelimits.Limited):
        ratelimits.hit(ratelimits.RUNS, reviewer)  # this gateway's window is full
    # Another gateway on the same Redis database, whose user has the same id (another
    # database, or the next test run's): its own window.
    settings.GATEWAY_PREFIX = prefixes[1]
    ratelimits.hit(ratelimits.RUNS, reviewer)
    with pytest.raises(ratelimits.Limited):
        ratelimits.hit(ratelimits.RUNS, reviewer)
