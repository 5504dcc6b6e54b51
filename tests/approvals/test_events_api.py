"""GET /api/events?after=&thread=: the event log in id order."""

import uuid
from typing import Any

import pytest

from agents.models import Event
from tests.approvals import state


class EventListTestCase:
    @pytest.fixture(autouse=True)
    def setup(self, users: dict[str, Any], api: Any) -> None:
        self.alice = api("reviewer")
        self.one, [s1] = state.suspended(users["operator"])
        self.two, [s2] = state.suspended(users["operator"])
        assert self.alice.post(state.resume_url(s1), {"approved": True}).status_code == 202
        assert self.bob_cancels(api, self.two)

    def bob_cancels(self, api: Any, thread: Any) -> bool:
        return api("teammate").post(f"/api/threads/{thread.pk}/cancel").status_code == 200

    def test_it_lists_every_event_in_id_order(self) -> None:
        r = self.alice.get("/api/events")
        assert r.status_code == 200
        events = r.json()["events"]
        assert [e["id"] for e in events] == list(
            Event.objects.order_by("id").values_list("id", flat=True)
        )
        assert [e["type"] for e in events] == [
            "AGENT_SUSPENDED",
            "AGENT_SUSPENDED",
            "SUSPENSION_DECIDED",
            "SUSPENSION_CANCELLED",
            "THREAD_CANCELLED",
        ]
        assert r.json()["last_id"] == events[-1]["id"]
        decided = events[2]
        assert set(decided) >= {"id", "type", "thread", "suspension", "payload", "created_at"}
        assert decided["thread"] == str(self.one.pk) and decided["actor"] == "alice"
        assert (
            decided["payload"]["status"] == "approved"
            and decided["payload"]["decided_by"] == "alice"
        )
        assert events[-1]["suspension"] is None and events[-1]["actor"] == "bob"

    def test_after_excludes_that_event_and_older_ones(self) -> None:
        ids = list(Event.objects.order_by("id").values_list("id", flat=True))
        r = self.alice.get("/api/events", after=str(ids[2]))
        assert [e["id"] for e in r.json()["events"]] == ids[3:]
        r = self.alice.get("/api/events", after=str(ids[-1]))
        assert r.json() == {"events": [], "last_id": ids[-1]}

    def test_it_filters_by_thread(self) -> None:
        r = self.alice.get("/api/events", thread=str(self.two.pk))
        assert [e["type"] for e in r.json()["events"]] == [
            "AGENT_SUSPENDED",
            "SUSPENSION_CANCELLED",
            "THREAD_CANCELLED",
        ]
        assert {e["thread"] for e in r.json()["events"]} == {str(self.two.pk)}
        first = r.json()["events"][0]["id"]
        r = self.alice.get("/api/events", thread=str(self.two.pk), after=str(first))
        assert [e["type"] for e in r.json()["events"]] == [
            "SUSPENSION_CANCELLED",
            "THREAD_CANCELLED",
        ]
        assert self.alice.get("/api/events", thread=str(uuid.uuid4())).json()["events"] == []

    def test_limit_takes_the_oldest_first(self) -> None:
        ids = list(Event.objects.order_by("id").values_list("id", flat=True))
        r = self.alice.get("/api/events", limit="2")
        assert [e["id"] for e in r.json()["events"]] == ids[:2]
        assert r.json()["last_id"] == ids[1]

    @pytest.mark.parametrize(
        "params, field",
        [
            ({"after": "abc"}, "after"),
            ({"after": "-1"}, "after"),
            ({"after": "1.5"}, "after"),
            ({"after": "²"}, "after"),
            ({"thread": "nope"}, "thread"),
            ({"limit": "0"}, "limit"),
        ],
    )
    def test_it_refuses_bad_parameters(self, params: dict, field: str) -> None:
        r = self.alice.get("/api/events", **params)
        assert r.status_code == 400, r.content
        assert r.json()["error"] == "invalid" and field in r.json()["fields"]
