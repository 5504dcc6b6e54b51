"""The REST side of input-required conversations: replies as text or JSON under the asking
agent's rules, and the list of threads that wait for a person."""

from typing import Any

import pytest

from agents import starting
from agents.engine import Engine
from agents.models import AgentDefinition, Event, Thread
from tests.approvals import state


def asking(users: Any, **rules: Any) -> Thread:
    AgentDefinition.objects.create(
        name="clerk",
        model="scripted",
        script=[{"text": "Which form?"}, {"text": "Noted."}],
        **rules,
    )
    desk = AgentDefinition.objects.create(
        name="desk",
        model="scripted",
        sub_agents=["clerk"],
        script=[
            {"tool_calls": [{"name": "use_agent", "input": {"name": "clerk", "message": "go"}}]}
        ],
    )
    thread = starting.start_thread(desk, "go", users["reviewer"])
    Engine().advance(thread.pk)
    thread.refresh_from_db()
    assert thread.status == "waiting_input"
    return thread


@pytest.mark.django_db(transaction=True)
class RepliesApiTestCase:
    def test_a_json_reply_is_accepted_as_an_object(self, users: Any, api: Any) -> None:
        thread = asking(users, input_types=["application/json"])
        r = api("reviewer").post(f"/api/threads/{thread.pk}/messages", {"data": {"form": "A"}})
        assert r.status_code == 202, r.content
        provided = Event.objects.get(thread=thread, type="INPUT_PROVIDED")
        assert provided.payload["type"] == "application/json"

    @pytest.mark.parametrize(
        ("rules", "body", "field"),
        [
            ({"input_types": ["application/json"]}, {"text": "A"}, "type"),
            ({}, {"data": [1, 2]}, "data"),
            ({"input_max_chars": 3}, {"text": "four"}, "text"),
            ({}, {"text": "A", "data": {}}, "data"),
            ({}, {"text": "A", "extra": 1}, "extra"),
        ],
    )
    def test_a_reply_against_the_rules_is_400_and_changes_nothing(
        self, users: Any, api: Any, rules: dict, body: dict, field: str
    ) -> None:
        thread = asking(users, **rules)
        before = Event.objects.filter(thread=thread).count()
        r = api("reviewer").post(f"/api/threads/{thread.pk}/messages", body)
        assert r.status_code == 400, r.content
        assert field in r.json()["fields"]
        assert Event.objects.filter(thread=thread).count() == before
        assert Thread.objects.get(pk=thread.pk).status == "waiting_input"

    def test_the_list_of_what_waits_for_a_person(self, users: Any, api: Any) -> None:
        waiting = asking(users)
        suspended, _ = state.suspended(users["operator"])
        quiet = state.thread(users["reviewer"], status=Thread.Status.SUSPENDED)  # none pending
        done = state.thread(users["reviewer"], status=Thread.Status.COMPLETED)
        client = api("reviewer")
        found = [t["id"] for t in client.get("/api/threads", waiting="true").json()["results"]]
        assert sorted(found) == sorted([str(waiting.pk), str(suspended.pk)])
        assert str(quiet.pk) not in found and str(done.pk) not in found
        row = next(t for t in client.get("/api/threads", status="waiting_input").json()["results"])
        assert row["id"] == str(waiting.pk) and row["input_prompt"] == "Which form?"
        assert client.get("/api/threads", status="nonsense").status_code == 400
