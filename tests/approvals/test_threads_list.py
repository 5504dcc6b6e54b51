"""GET /api/threads: newest first, ?status= honoured, a page at a time with a `next` link,
and a clear 400 for a bad value."""

from datetime import timedelta
from typing import Any

import pytest
from django.utils import timezone

from agents.models import Thread
from tests.approvals import state


@pytest.fixture
def made(users: dict[str, Any]) -> list[Thread]:
    """Seven runs, one second apart (the newest last), every third one completed; two of
    them share a start time, which the cursor must still tell apart."""
    now = timezone.now()
    rows = []
    for i in range(7):
        status = Thread.Status.COMPLETED if i % 3 == 0 else Thread.Status.RUNNING
        row = state.thread(users["operator"], status=status)
        at = now - timedelta(seconds=10 - min(i, 5))  # runs 5 and 6 start together
        Thread.objects.filter(pk=row.pk).update(created_at=at)
        rows.append(row)
    return rows


def ids(body: dict[str, Any]) -> list[str]:
    return [t["id"] for t in body["results"]]


def test_pages_follow_next_newest_first_without_repeats(api: Any, made: list[Thread]) -> None:
    client = api("reviewer")
    r = client.get("/api/threads", limit="3")
    assert r.status_code == 200, r.content
    seen, pages = [], 0
    body = r.json()
    while True:
        pages += 1
        assert len(body["results"]) <= 3
        seen += ids(body)
        if body["next"] is None:
            break
        assert body["next"].startswith("/api/threads?") and "limit=3" in body["next"]
        body = client.get(body["next"]).json()
    assert pages == 3
    expected = sorted(made, key=lambda t: (Thread.objects.get(pk=t.pk).created_at, t.pk))
    assert seen == [str(t.pk) for t in reversed(expected)]


def test_status_filters_and_pages(api: Any, made: list[Thread]) -> None:
    client = api("reviewer")
    done = {str(t.pk) for t in made if t.status == Thread.Status.COMPLETED}
    first = client.get("/api/threads", status="completed", limit="2").json()
    assert first["next"] and "status=completed" in first["next"]
    second = client.get(first["next"]).json()
    assert set(ids(first) + ids(second)) == done and second["next"] is None
    assert {t["status"] for t in first["results"] + second["results"]} == {"completed"}


@pytest.mark.parametrize(
    "params, field",
    [
        ({"status": "finished"}, "status"),
        ({"limit": "0"}, "limit"),
        ({"limit": "201"}, "limit"),
        ({"limit": "ten"}, "limit"),
        ({"cursor": "not-a-cursor"}, "cursor"),
        ({"waiting": "maybe"}, "waiting"),
    ],
)
def test_a_bad_value_answers_400_naming_the_field(
    api: Any, made: list[Thread], params: dict[str, str], field: str
) -> None:
    r = api("reviewer").get("/api/threads", **params)
    assert r.status_code == 400, r.content
    body = r.json()
    assert body["error"] == "invalid" and field in body["fields"], body
