"""When a periodic job (the sweeper) last ran, wherever it ran: for /readyz and the metrics.

Kept where every machine of the deployment sees it: in Redis when there is one (one key per
job, written at each run), else in a file's time in the data folder (one machine).

redis-py is imported when there is a Redis, not with this module: the embedded setup's
deadlines worker imports it (issue 42)."""

from __future__ import annotations

import os
import time
from functools import cache
from pathlib import Path
from typing import TYPE_CHECKING

from django.conf import settings

if TYPE_CHECKING:
    import redis

TIMEOUT = 2.0


@cache
def _client(url: str) -> redis.Redis:
    import redis

    return redis.Redis.from_url(url, socket_timeout=TIMEOUT, socket_connect_timeout=TIMEOUT)


def _key(job: str) -> str:
    return f"{settings.CELERY_TASK_DEFAULT_QUEUE}:last-run:{job}"


def _path(job: str) -> Path:
    return Path(settings.DATA_DIR) / f"last-run-{job}"


def mark(job: str, now: float | None = None) -> None:
    """`job` has just run (at `now`, a Unix time, for a test)."""
    now = time.time() if now is None else now
    if settings.REDIS_URL:
        _client(settings.REDIS_URL).set(_key(job), repr(now))
        return
    path = _path(job)
    path.touch()
    os.utime(path, (now, now))


def last_run(job: str) -> float | None:
    """When `job` last ran (a Unix time), or None if never. Raises RedisError when Redis does
    not answer."""
    if settings.REDIS_URL:
        value = _client(settings.REDIS_URL).get(_key(job))
        return float(value) if value else None
    try:
        return _path(job).stat().st_mtime
    except FileNotFoundError:
        return None
