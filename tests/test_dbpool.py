"""infra.dbpool: a pooled PostgreSQL connection is checked as it leaves the pool without a
round trip while its socket is quiet, and a dead one is still found and replaced."""

import time
from typing import Any

import psycopg
import pytest
from django.db import connection
from psycopg_pool import ConnectionPool

from infra import dbpool


@pytest.fixture
def pool(db: Any) -> Any:
    if connection.vendor != "postgresql":
        pytest.skip("the pool is PostgreSQL's (SQLite has none)")
    params = connection.get_connection_params()
    params.pop("cursor_factory", None)
    params.pop("context", None)
    pool = ConnectionPool(kwargs={**params, "autocommit": True}, min_size=1, max_size=1)
    pool._check = dbpool.checker(pool)
    with pool:
        yield pool


def test_a_quiet_connection_is_handed_out_without_a_round_trip(
    pool: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    sent: list[Any] = []
    monkeypatch.setattr(ConnectionPool, "check_connection", staticmethod(sent.append))
    for _ in range(3):
        with pool.connection() as conn:
            assert conn.execute("SELECT 1").fetchone() == (1,)
    assert sent == []


def test_a_connection_whose_server_process_ended_is_replaced(pool: Any) -> None:
    with pool.connection() as conn:
        first = conn.info.backend_pid
    params = connection.get_connection_params()
    with psycopg.connect(
        dbname=params["dbname"],
        host=params.get("host"),
        port=params.get("port"),
        user=params.get("user"),
        autocommit=True,
    ) as other:
        other.execute("SELECT pg_terminate_backend(%s)", [first])
    time.sleep(0.2)  # the server's goodbye reaches the idle connection's socket
    with pool.connection() as conn:  # found dead as it leaves the pool: a new one instead
        assert conn.execute("SELECT 1").fetchone() == (1,)
        assert conn.info.backend_pid != first
