"""PostgreSQL's connection pool, made to come back as soon as the server does.

psycopg_pool copes with a restarted server one connection at a time: the check that finds a
dead connection sleeps before trying the next one (1, 2, 4 s...), and its attempts to reconnect
wait ever longer between two tries, with no cap. After a restart every idle connection is
dead, so a request could wait for seconds while the server was already back (tests/faults,
postgres restart). The library has no settings for either: the backend in infra.postgresql
installs `checker`, and settings.py calls `steady_reconnects`.

psycopg (some 10 MB) is imported by these functions, which run only with PostgreSQL, not with
this module: settings.py imports it whatever the database (issue 42).
"""

from __future__ import annotations

import select
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from psycopg_pool import ConnectionPool


def _quiet(conn: Any) -> bool:
    """Whether nothing came on an idle connection since it was last used. A server that goes
    away (stopped, restarted, or a backend terminated) says so on every connection, with an
    error message or by closing it, and either makes the socket readable; a live server sends
    nothing to a connection that waits for no result and listens for nothing."""
    if conn.closed or conn.broken:
        return False
    try:
        # poll, not select: a daphne holding a thousand sockets has descriptors past select's
        # limit.
        poller = select.poll()
        poller.register(conn.fileno(), select.POLLIN)
        return not poller.poll(0)
    except (OSError, ValueError):
        return False


def checker(pool: ConnectionPool) -> Callable[[Any], None]:
    """The check of a connection the pool hands out. psycopg_pool's own sends an empty query
    and waits for the answer, a round trip to PostgreSQL at every request and every step
    (bench/README.md); a quiet socket (`_quiet`) is checked without one, and
    anything else as psycopg_pool does. When one is dead, the server went away: every idle
    connection is checked at once and the dead ones replaced, instead of one sleep of the
    pool's check loop for each of them."""
    from psycopg_pool import ConnectionPool

    def check(conn: Any) -> None:
        if _quiet(conn):
            return
        try:
            ConnectionPool.check_connection(conn)
        except Exception:
            pool.check()
            raise

    return check


def steady_reconnects() -> None:
    """Retry a lost server every second instead of after ever longer waits; the pool's
    reconnect_timeout still bounds the attempts as a whole."""
    from psycopg_pool.base import AttemptWithBackoff

    AttemptWithBackoff.DELAY_BACKOFF = 1.0
