"""PostgreSQL's connection pool, made to come back as soon as the server does.

psycopg_pool copes with a restarted server one connection at a time: the check that finds a
dead connection sleeps before trying the next one (1, 2, 4 s...), and its attempts to reconnect
wait ever longer between two tries, with no cap. After a restart every idle connection is
dead, so a request could wait for seconds while the server was already back (tests/faults,
postgres restart). The library has no settings for either: the backend in gateway.postgresql
installs `checker`, and settings.py calls `steady_reconnects`.
"""

from collections.abc import Callable
from typing import Any

from psycopg_pool import ConnectionPool
from psycopg_pool.base import AttemptWithBackoff


def checker(pool: ConnectionPool) -> Callable[[Any], None]:
    """The check of a connection the pool hands out. When one is dead, the server went away:
    every idle connection is checked at once and the dead ones replaced, instead of one
    sleep of the pool's check loop for each of them."""

    def check(conn: Any) -> None:
        try:
            ConnectionPool.check_connection(conn)
        except Exception:
            pool.check()
            raise

    return check


def steady_reconnects() -> None:
    """Retry a lost server every second instead of after ever longer waits; the pool's
    reconnect_timeout still bounds the attempts as a whole."""
    AttemptWithBackoff.DELAY_BACKOFF = 1.0
