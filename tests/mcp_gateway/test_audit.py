"""mcp_gateway.audit: an immediate call's MCP_TOOL_CALLED, queued at its answer and written
just after by the loop's writer, in order, all of them, a failed write tried again."""

import asyncio
import itertools
import logging
import time
from typing import Any

import pytest
from django.db import OperationalError

from agents.hashing import canonical_hash
from agents.models import Event
from infra.aio import blocking
from mcp_gateway import actions, audit


def written() -> list[Event]:
    return list(Event.objects.filter(type=Event.Type.MCP_TOOL_CALLED).order_by("pk"))


async def until_written(count: int, timeout: float = 20) -> list[Event]:
    """The events once `count` are written (the writer task runs detached on this loop, so
    the coroutine waits for it before asyncio.run ends the loop)."""
    deadline = time.monotonic() + timeout
    while True:
        events = await blocking(written)()
        if len(events) >= count:
            return events
        assert time.monotonic() < deadline, f"{len(events)} of {count} events written"
        await asyncio.sleep(0.02)


def queue(user: Any, n: int, start: int = 0) -> list[dict[str, Any]]:
    calls = []
    for i in range(start, start + n):
        arguments = {"name": f"note-{i}"}
        result = {"content": [], "isError": i % 3 == 0}
        audit.later(
            actions.called(user, "files", "read_note", arguments, result, 0.001 * i + 0.0004)
        )
        calls.append(arguments)
    return calls


@pytest.fixture
def user(users: dict[str, Any], transactional_db: Any) -> Any:
    return users["operator"]


def test_each_call_is_written_once_in_the_order_queued(user: Any) -> None:
    async def go() -> tuple[list[dict[str, Any]], list[Event]]:
        calls = queue(user, 5)
        return calls, await until_written(5)

    calls, _ = asyncio.run(go())
    time.sleep(0.2)
    events = written()
    assert len(events) == 5
    for i, (arguments, event) in enumerate(zip(calls, events, strict=True)):
        assert event.actor_id == user.pk and event.actor_name == user.username
        assert event.thread_id is None and event.suspension_id is None
        assert event.payload == {
            "agent": "files",
            "tool": "read_note",
            "args_hash": canonical_hash(arguments),
            "duration_ms": round((0.001 * i + 0.0004) * 1000, 1),
            "outcome": "error" if i % 3 == 0 else "ok",
            "gated": False,
        }
    # Chained in that order.
    assert all(b.prev_hash == a.hash for a, b in itertools.pairwise(events))


def test_calls_queued_while_a_write_is_under_way_are_written_too(user: Any) -> None:
    async def go() -> list[dict[str, Any]]:
        calls = queue(user, 3)
        await asyncio.sleep(0)  # the writer starts on the first batch
        calls += queue(user, 4, start=3)
        await until_written(7)
        return calls

    calls = asyncio.run(go())
    events = written()
    assert [e.payload["args_hash"] for e in events] == [canonical_hash(a) for a in calls]


def test_many_calls_at_once_are_all_written(user: Any) -> None:
    n = audit.BATCH * 2 + 37  # more than one transaction's worth

    async def go() -> list[dict[str, Any]]:
        calls = queue(user, n)
        await until_written(n, timeout=60)
        return calls

    calls = asyncio.run(go())
    events = written()
    assert len(events) == n
    assert [e.payload["args_hash"] for e in events] == [canonical_hash(a) for a in calls]


def test_a_failed_write_is_tried_again(
    user: Any, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    # A stand-in for the database being away for the first attempt: record_calls raises as
    # the driver would, once, then writes for real.
    real = actions.record_calls
    attempts: list[int] = []

    def flaky(events: list[Event]) -> None:
        attempts.append(len(events))
        if len(attempts) == 1:
            raise OperationalError("could not connect to server")
        real(events)

    monkeypatch.setattr(actions, "record_calls", flaky)
    monkeypatch.setattr(audit, "FIRST_PAUSE", 0.05)

    async def go() -> list[dict[str, Any]]:
        calls = queue(user, 3)
        await until_written(3)
        return calls

    with caplog.at_level(logging.WARNING, logger="mcp_gateway.audit"):
        calls = asyncio.run(go())
    events = written()
    assert [e.payload["args_hash"] for e in events] == [canonical_hash(a) for a in calls]
    assert attempts == [3, 3]
    assert "write 1 failed" in caplog.text
    assert not [r for r in caplog.records if r.levelno >= logging.ERROR]


def test_a_write_that_keeps_failing_is_logged_as_an_error_with_its_count(
    user: Any, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    # A stand-in for the database away for longer than the writer tries.
    attempts: list[int] = []

    def away(events: list[Event]) -> None:
        attempts.append(len(events))
        raise OperationalError("could not connect to server")

    monkeypatch.setattr(actions, "record_calls", away)
    monkeypatch.setattr(audit, "FIRST_PAUSE", 0.01)

    async def go() -> None:
        queue(user, 4)
        deadline = time.monotonic() + 10
        while (
            len(attempts) < audit.WRITE_ATTEMPTS
            or not caplog.records[-1:]
            or (caplog.records[-1].levelno < logging.ERROR)
        ):
            assert time.monotonic() < deadline, attempts
            await asyncio.sleep(0.02)

    with caplog.at_level(logging.WARNING, logger="mcp_gateway.audit"):
        asyncio.run(go())
    assert attempts == [4] * audit.WRITE_ATTEMPTS
    [error] = [r for r in caplog.records if r.levelno >= logging.ERROR]
    assert error.getMessage() == "4 MCP call events could not be written"
    assert written() == []
