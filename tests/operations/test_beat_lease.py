"""infra.beat_lease: one holder at a time; a second waits and takes over when the first goes."""

import os
import time
import uuid

import pytest

from infra import beat_lease
from infra.beat_lease import FileLease, RedisLease


class FileLeaseTestCase:
    def test_a_second_lease_waits_until_the_first_is_released(self, settings, tmp_path) -> None:
        settings.REDIS_URL = ""
        settings.DATA_DIR = tmp_path
        first, second = beat_lease.lease("one:1"), beat_lease.lease("two:2")
        assert isinstance(first, FileLease)
        assert beat_lease.holder() is None
        assert first.take() and first.take()  # renewing a held lease keeps it
        assert not second.take()
        assert beat_lease.holder() == "one:1"
        first.release()
        assert second.take()
        assert beat_lease.holder() == "two:2"
        second.release()


def _redis_url() -> str:
    url = os.environ.get("REDIS_URL", "")
    if not url:
        # The embedded half of `make test` has no Redis; its PostgreSQL + Redis half runs this
        # (and in CI fails when Redis is missing: the Makefile's test-postgres).
        pytest.skip("REDIS_URL is not set: the Redis lease needs a Redis")
    return url


class RedisLeaseTestCase:
    def test_a_second_lease_takes_over_when_the_first_is_not_renewed(self, settings) -> None:
        url = _redis_url()
        settings.REDIS_URL = url
        settings.BEAT_LEASE_KEY = f"test-lease-{uuid.uuid4().hex}"
        settings.BEAT_LEASE_SECONDS = 1
        first, second = beat_lease.lease("one:1"), beat_lease.lease("two:2")
        assert isinstance(first, RedisLease)
        assert first.take()
        assert not second.take()
        assert beat_lease.holder() == "one:1"
        time.sleep(0.6)
        assert first.take()  # renewed: a full second again
        time.sleep(0.6)
        assert not second.take()
        # The first stops renewing (it died or hangs): the lease runs out and moves.
        time.sleep(1.2)
        assert second.take()
        assert beat_lease.holder() == "two:2"
        # The first, back, finds it lost the lease rather than renewing another's.
        assert not first.take()
        assert beat_lease.holder() == "two:2"
        second.release()
        assert beat_lease.holder() is None

    def test_an_unreachable_redis_means_the_lease_is_not_held(self, settings) -> None:
        settings.REDIS_URL = "redis://127.0.0.1:1/0"
        lease = beat_lease.lease("one:1")
        assert not lease.take()
