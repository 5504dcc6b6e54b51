"""Celery beat's scheduler for `serve --role beat`: it sends the periodic tasks only while it
holds the beat lease (infra.beat_lease), so one beat sweeps at a time whatever the number of
machines, and a waiting beat takes over within the lease's time when the holder dies.

The sweeper's work stays idempotent all the same (conditional updates, agents.deadlines): a
beat paused in the middle of a tick longer than the lease may send one more round of tasks
after another beat took over, before its next tick finds the lease gone."""

import logging
from typing import Any

from celery.beat import PersistentScheduler
from django.conf import settings
from redis.exceptions import RedisError

from infra import beat_lease

log = logging.getLogger(__name__)
# Celery sets beat's log level (serve asks for warnings); taking, losing or waiting for the
# lease is said at INFO all the same: an operator looks for the holder in the log.
log.setLevel(logging.INFO)


def _holder() -> str | None:
    try:
        return beat_lease.holder()
    except RedisError:
        return "unknown, Redis does not answer"


class LeasedScheduler(PersistentScheduler):
    def setup_schedule(self) -> None:
        super().setup_schedule()
        self.lease = beat_lease.lease()
        self.name = beat_lease.own_name()
        self.holding: bool | None = None
        # Renewed three times per lease: a slow tick or two does not lose it.
        self.renew_every = settings.BEAT_LEASE_SECONDS / 3

    def tick(self, *args: Any, **kwargs: Any) -> float:
        held = self.lease.take()
        if held != self.holding:
            if held:
                log.info("beat lease taken by %s: this beat sends the periodic tasks", self.name)
            else:
                log.info("beat lease not held by %s (holder: %s): it waits", self.name, _holder())
            self.holding = held
        if not held:
            return self.renew_every
        return min(super().tick(*args, **kwargs), self.renew_every)

    def close(self) -> None:
        if getattr(self, "holding", False):
            # Released, not left to run out: a waiting beat takes over at its next tick.
            self.lease.release()
            log.info("beat lease released by %s", self.name)
        super().close()
