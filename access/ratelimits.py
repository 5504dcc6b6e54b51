"""Rate limits on starting runs and on deciding: per API token and per user, fixed windows.

The windows and counting are the `limits` library's (FixedWindowRateLimiter). Its counters
live in Redis when REDIS_URL is set (its RedisStorage increments and sets the expiry in one
Lua script, so every daphne process shares them atomically; each key begins with the
gateway's GATEWAY_PREFIX and expires with its window, so gateways or test runs sharing a Redis
database, whose users' ids repeat, never count each other's calls); otherwise in the database, in
RateCounter rows that DatabaseStorage below increments with one INSERT … ON CONFLICT DO UPDATE
… RETURNING (atomic on SQLite and PostgreSQL alike). `limits` ships no SQL storage, and
django-ratelimit counts in Django's cache, whose database backend increments by a read and a
write (not atomic), so neither covers the embedded setup alone; this module is the one storage
`limits` lacks, and nothing else.

A call is counted once per key it is limited by (its token, when it came with one, and its
user), refused calls too: a flood keeps its own window full, and nobody else's.
"""

import math
import time
from dataclasses import dataclass
from functools import cache
from typing import Any

# Imported here, whole, before any request: limits' RedisStorage looks redis up in sys.modules
# and reads its __version__, so a first use racing another thread's first import of redis
# finds a half-made module ("minimum version of 3.0 ... Found version: 0.0.0") and fails.
import redis  # noqa: F401 - imported whole at load, for its side effect (see above)
from django.conf import settings
from django.db import DatabaseError, connection
from django.http import JsonResponse
from limits import RateLimitItem, parse_many
from limits.storage import RedisStorage, Storage
from limits.strategies import FixedWindowRateLimiter

from access.models import RateCounter
from access.scopes import token_of
from infra.answers import error

RUNS = "runs"  # starting a run: POST /api/threads, A2A SendMessage of a new task
DECISIONS = "decisions"  # resumeExecution, each POST /api/decisions item, A2A decisions, answers
SLACK_CONNECT = "slack_connect"  # the Slack page's direct message asking to link (a person's)

# What each kind is called in answers, and its settings: per token, per user.
KINDS = {
    RUNS: ("start runs", "RATE_LIMIT_RUNS", "RATE_LIMIT_USER_RUNS"),
    DECISIONS: ("decide", "RATE_LIMIT_DECISIONS", "RATE_LIMIT_USER_DECISIONS"),
    # Asked from a page, never with a token: the one setting counts per user.
    SLACK_CONNECT: (
        "ask Slack to link an account",
        "RATE_LIMIT_SLACK_CONNECT",
        "RATE_LIMIT_SLACK_CONNECT",
    ),
}


@dataclass(eq=False)
class Limited(Exception):
    """Refused for now: HTTP 429 with Retry-After (seconds, at least 1)."""

    code: str
    detail: str
    retry_after: int

    def __str__(self) -> str:
        return self.detail


class DatabaseStorage(Storage):
    """Fixed-window counters in RateCounter rows (the embedded setup has no Redis)."""

    STORAGE_SCHEME = None

    @property
    def base_exceptions(self) -> type[Exception]:
        return DatabaseError

    def incr(self, key: str, expiry: int, amount: int = 1) -> int:
        now = time.time()
        table = connection.ops.quote_name(RateCounter._meta.db_table)
        # The same statement on SQLite (3.35+) and PostgreSQL: a new row, or the row's hits
        # added to, or started over once its window has passed; read back in one step.
        sql = (
            f"INSERT INTO {table} (key, hits, expires_at) VALUES (%s, %s, %s) "
            "ON CONFLICT (key) DO UPDATE SET "
            f"hits = CASE WHEN {table}.expires_at <= %s THEN excluded.hits "
            f"ELSE {table}.hits + excluded.hits END, "
            f"expires_at = CASE WHEN {table}.expires_at <= %s THEN excluded.expires_at "
            f"ELSE {table}.expires_at END "
            "RETURNING hits"
        )
        with connection.cursor() as cursor:
            cursor.execute(sql, [key, amount, now + expiry, now, now])
            return int(cursor.fetchone()[0])

    def _row(self, key: str) -> tuple[int, float] | None:
        rows = RateCounter.objects.filter(key=key, expires_at__gt=time.time())
        return rows.values_list("hits", "expires_at").first()

    def get(self, key: str) -> int:
        row = self._row(key)
        return row[0] if row else 0

    def get_expiry(self, key: str) -> float:
        row = self._row(key)
        return row[1] if row else time.time()

    def check(self) -> bool:
        try:
            RateCounter.objects.exists()
        except DatabaseError:
            return False
        return True

    def reset(self) -> int | None:
        deleted, _ = RateCounter.objects.all().delete()
        return deleted

    def clear(self, key: str) -> None:
        RateCounter.objects.filter(key=key).delete()


@cache
def _storage(redis_url: str, prefix: str) -> Storage:
    if redis_url:
        # Keys "<prefix>-limits:LIMITER/<kind>/<token|user>/<id>/...", with the window's TTL.
        return RedisStorage(redis_url, key_prefix=f"{prefix}-limits")
    return DatabaseStorage()


def storage() -> Storage:
    return _storage(settings.REDIS_URL, settings.GATEWAY_PREFIX)


@cache
def _items(text: str) -> list[RateLimitItem]:
    return parse_many(text) if text.strip() else []


def _limiter() -> FixedWindowRateLimiter:
    return FixedWindowRateLimiter(storage())


def keys(user: Any) -> list[tuple[str, str]]:
    """What a call of `user` is counted under: ("token", its id) when it came with a token,
    and ("user", the user's id)."""
    token = token_of(user)
    found = [("token", str(token.pk))] if token is not None else []
    return [*found, ("user", str(user.pk))]


def hit(kind: str, user: Any) -> None:
    """Count one call of `kind` by `user`; raise Limited when a window is full."""
    what, per_token, per_user = KINDS[kind]
    counted = [
        (role, key_id, item)
        for role, key_id in keys(user)
        for item in _items(getattr(settings, per_token if role == "token" else per_user))
    ]
    if not counted:
        return  # no limit set: nothing to count
    limiter = _limiter()
    refused: list[tuple[RateLimitItem, tuple[str, ...], str]] = []
    for role, key_id, item in counted:
        identifiers = (kind, role, key_id)
        if not limiter.hit(item, *identifiers):
            refused.append((item, identifiers, role))
    if not refused:
        return
    now = time.time()
    # When the fullest window starts over; no later than a whole window (Redis keeps expiries
    # in whole seconds, so its reset time can be a fraction of a second beyond one).
    wait = max(
        min(item.get_expiry(), math.ceil(limiter.get_window_stats(item, *ids).reset_time - now))
        for item, ids, _ in refused
    )
    wait = max(1, wait)
    item, _, role = refused[0]
    who = "This token" if role == "token" else "You"
    raise Limited(
        "rate_limited",
        f"{who} may {what} at most {item.amount} times per {_period(item)}; try again in {wait} s.",
        wait,
    )


def _period(item: RateLimitItem) -> str:
    unit = item.GRANULARITY.name
    return unit if item.multiples == 1 else f"{item.multiples} {unit}s"


def too_many(e: Limited) -> JsonResponse:
    response = error(429, e.code, e.detail, retry_after=e.retry_after)
    response["Retry-After"] = str(e.retry_after)
    return response
