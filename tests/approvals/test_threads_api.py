"""Threads over the API: start, read, send a message, cancel."""

import uuid
from typing import Any

import pytest

from agents.models import Event, StackFrame, Suspension, Thread
from tests.approvals import state

# A well-formed id no row has, the same in every process: pytest-xdist's workers must
# collect the same test names.
UNKNOWN_ID = "6f1c2a1e-8d4b-4c3e-9a8f-2b7d5e0c1a93"


class StartThreadTestCase:
    @pytest.fixture(autouse=True)
    def setup(self, users: dict[str, Any], api: Any) -> None:
        self.users = users
        self.alice = api("reviewer")
        state.agent("payer")

    def test_it_starts_a_run(self) -> None:
        r = self.alice.post("/api/threads", {"agent": "payer", "message": "Pay the supplier."})
        assert r.status_code == 201, r.content
        body = r.json()
        assert body["agent"] == "payer" and body["status"] == "running"
        assert body["created_by"] == "alice" and body["pending_suspensions"] == []
        thread = Thread.objects.get(pk=body["id"])
        [frame] = body["stack"]
        assert frame["agent"] == "payer" and frame["type"] == "main" and frame["depth"] == 0
        row = thread.frames.get()
        assert row.messages == [
            {"role": "user", "content": [{"type": "text", "text": "Pay the supplier."}]}
        ]
        [event] = Event.objects.filter(thread=thread)
        assert event.type == "THREAD_STARTED" and event.actor == self.users["reviewer"]
        assert body["last_event_id"] == event.id

    def test_the_start_answers_with_what_a_read_of_the_thread_gives(self) -> None:
        # The 201 is built from what the start wrote, not read back (approvals.api.payloads):
        # it must not differ from the thread as GET shows it before anything else happens to it.
        r = self.alice.post("/api/threads", {"agent": "payer", "message": "Pay the supplier."})
        assert r.status_code == 201, r.content
        read = self.alice.get(f"/api/threads/{r.json()['id']}")
        assert r.json() == read.json()

    @pytest.mark.parametrize(
        "body, field",
        [
            ({"agent": "nobody", "message": "go"}, "agent"),
            ({"agent": "", "message": "go"}, "agent"),
            ({"agent": 5, "message": "go"}, "agent"),
            ({"message": "go"}, "agent"),
            ({"agent": "payer", "message": ""}, "message"),
            ({"agent": "payer", "message": "   \n"}, "message"),
            ({"agent": "payer"}, "message"),
            ({"agent": "payer", "message": ["go"]}, "message"),
            ({"agent": "payer", "message": "go", "user": "bob"}, "user"),
        ],
    )
    def test_it_refuses_a_bad_request_with_field_errors(self, body: dict, field: str) -> None:
        r = self.alice.post("/api/threads", body)
        assert r.status_code == 400, r.content
        data = r.json()
        assert data["error"] == "invalid" and data["detail"]
        assert field in data["fields"], data
        assert not Thread.objects.exists() and not Event.objects.exists()

    def test_it_refuses_malformed_json(self) -> None:
        r = self.alice.post("/api/threads", raw="{agent: payer}")
        assert r.status_code == 400 and r.json()["error"] == "invalid_json"
        assert not Thread.objects.exists()

    def test_it_lists_recent_threads(self) -> None:
        first = self.alice.post("/api/threads", {"agent": "payer", "message": "one"}).json()
        second = self.alice.post("/api/threads", {"agent": "payer", "message": "two"}).json()
        r = self.alice.get("/api/threads")
        assert r.status_code == 200
        assert [t["id"] for t in r.json()["results"]] == [second["id"], first["id"]]


class ThreadDetailTestCase:
    @pytest.fixture(autouse=True)
    def setup(self, users: dict[str, Any], api: Any) -> None:
        self.alice = api("reviewer")
        self.users = users

    def test_it_shows_status_stack_and_pending_suspensions(self) -> None:
        thread, [first, second] = state.suspended(
            self.users["operator"],
            calls=[("transfer_funds", state.TRANSFER), ("ask_user", {"question": "Why?"})],
        )
        StackFrame.objects.create(
            thread=thread,
            parent=thread.frames.get(),
            depth=1,
            agent_name="checker",
            agent_type=StackFrame.Type.AGENT,
            parent_tool_use_id="toolu_child",
            model="scripted",
        )
        StackFrame.objects.create(
            thread=thread,
            depth=1,
            agent_name="finished",
            agent_type=StackFrame.Type.SKILL,
            status=StackFrame.Status.COMPLETED,
            model="scripted",
        )
        Suspension.objects.filter(pk=second.pk).update(status="approved", approved=True)
        r = self.alice.get(f"/api/threads/{thread.pk}")
        assert r.status_code == 200
        body = r.json()
        assert body["id"] == str(thread.pk) and body["status"] == "suspended"
        # Active frames only, the top of the stack last.
        assert [(f["agent"], f["type"], f["depth"]) for f in body["stack"]] == [
            ("payer", "main", 0),
            ("checker", "agent", 1),
        ]
        assert body["stack"][1]["parent_tool_use_id"] == "toolu_child"
        [pending] = body["pending_suspensions"]
        assert pending["id"] == str(first.pk) and pending["tool"] == "transfer_funds"
        assert pending["input"] == state.TRANSFER and pending["status"] == "pending"
        assert body["last_event_id"] == Event.objects.filter(thread=thread).latest("id").id

    @pytest.mark.parametrize("thread_id", [UNKNOWN_ID, "not-a-uuid", "42"])
    def test_an_unknown_thread_is_a_json_404(self, thread_id: str) -> None:
        r = self.alice.get(f"/api/threads/{thread_id}")
        assert r.status_code == 404
        assert r.json()["error"] == "not_found" and r.json()["detail"]


class ThreadMessagesTestCase:
    @pytest.fixture(autouse=True)
    def setup(self, users: dict[str, Any], api: Any) -> None:
        self.alice = api("reviewer")
        self.users = users
        self.conversation = [
            {"role": "user", "content": [{"type": "text", "text": "go"}]},
            {"role": "assistant", "content": [{"type": "text", "text": "Which account?"}]},
        ]

    def url(self, thread: Thread) -> str:
        return f"/api/threads/{thread.pk}/messages"

    def test_a_waiting_thread_takes_the_message_on_the_top_frame(self) -> None:
        thread = state.thread(
            self.users["reviewer"],
            status=Thread.Status.WAITING_INPUT,
            frames=2,
            messages=self.conversation,
        )
        r = self.alice.post(self.url(thread), {"text": "Account A-1."})
        assert r.status_code == 202, r.content
        assert r.json()["status"] == "running"
        thread.refresh_from_db()
        assert thread.status == Thread.Status.RUNNING and thread.runnable_since is not None
        bottom, top = thread.frames.order_by("depth")
        assert top.messages[-1] == {
            "role": "user",
            "content": [{"type": "text", "text": "Account A-1."}],
        }
        assert bottom.messages == self.conversation
        [event] = Event.objects.filter(thread=thread, type="USER_MESSAGE")
        assert event.actor == self.users["reviewer"] and event.payload["text"] == "Account A-1."

    @pytest.mark.parametrize(
        "status",
        [
            Thread.Status.RUNNING,
            Thread.Status.SUSPENDED,
            Thread.Status.COMPLETED,
            Thread.Status.FAILED,
            Thread.Status.CANCELLED,
        ],
    )
    def test_it_refuses_a_message_unless_the_thread_waits_for_one(self, status: str) -> None:
        thread = state.thread(self.users["reviewer"], status=status, messages=self.conversation)
        r = self.alice.post(self.url(thread), {"text": "hello"})
        assert r.status_code == 409
        assert r.json()["error"] == "not_waiting_for_input" and r.json()["status"] == status
        assert thread.frames.get().messages == self.conversation
        assert not Event.objects.filter(thread=thread).exists()

    @pytest.mark.parametrize("body", [{}, {"text": ""}, {"text": "  "}, {"text": 3}])
    def test_it_refuses_an_empty_message(self, body: dict) -> None:
        thread = state.thread(self.users["reviewer"], status=Thread.Status.WAITING_INPUT)
        r = self.alice.post(self.url(thread), body)
        assert r.status_code == 400 and "text" in r.json()["fields"]
        thread.refresh_from_db()
        assert thread.status == Thread.Status.WAITING_INPUT

    def test_an_unknown_thread_is_a_404(self) -> None:
        assert (
            self.alice.post(f"/api/threads/{uuid.uuid4()}/messages", {"text": "x"}).status_code
            == 404
        )


class CancelThreadTestCase:
    @pytest.fixture(autouse=True)
    def setup(self, users: dict[str, Any], api: Any) -> None:
        self.bob = api("teammate")
        self.users = users

    def test_it_cancels_pending_suspensions_and_the_stack(self) -> None:
        thread, suspensions = state.suspended(
            self.users["operator"],
            calls=[("transfer_funds", state.TRANSFER), ("send_email", {"to": "a@example.com"})],
        )
        r = self.bob.post(f"/api/threads/{thread.pk}/cancel")
        assert r.status_code == 200, r.content
        assert r.json()["status"] == "cancelled"
        assert r.json()["stack"] == [] and r.json()["pending_suspensions"] == []
        for s in suspensions:
            s.refresh_from_db()
            assert s.status == Suspension.Status.CANCELLED
            assert s.decided_by == self.users["teammate"] and s.decided_at is not None
        assert Event.objects.filter(thread=thread, type="SUSPENSION_CANCELLED").count() == 2
        assert set(thread.frames.values_list("status", flat=True)) == {"cancelled"}
        [event] = Event.objects.filter(thread=thread, type="THREAD_CANCELLED")
        assert event.actor == self.users["teammate"]
        assert Thread.objects.get(pk=thread.pk).status == Thread.Status.CANCELLED

    def test_a_decided_suspension_keeps_its_decision(self) -> None:
        thread, [first, second] = state.suspended(
            self.users["operator"],
            calls=[
                ("send_email", {"to": "a@example.com"}),
                ("send_email", {"to": "b@example.com"}),
            ],
        )
        assert self.bob.post(state.resume_url(first), {"approved": True}).status_code == 202
        assert self.bob.post(f"/api/threads/{thread.pk}/cancel").status_code == 200
        first.refresh_from_db()
        second.refresh_from_db()
        assert (first.status, second.status) == ("approved", "cancelled")

    def test_a_second_cancel_is_a_409(self) -> None:
        thread, _ = state.suspended(self.users["operator"])
        assert self.bob.post(f"/api/threads/{thread.pk}/cancel").status_code == 200
        count = Event.objects.count()
        r = self.bob.post(f"/api/threads/{thread.pk}/cancel")
        assert r.status_code == 409
        assert r.json()["error"] == "already_finished" and r.json()["status"] == "cancelled"
        assert Event.objects.count() == count

    def test_a_finished_thread_cannot_be_cancelled(self) -> None:
        thread = state.thread(self.users["reviewer"], status=Thread.Status.COMPLETED)
        assert self.bob.post(f"/api/threads/{thread.pk}/cancel").status_code == 409
        assert Thread.objects.get(pk=thread.pk).status == Thread.Status.COMPLETED

    def test_an_unknown_thread_is_a_404(self) -> None:
        assert self.bob.post(f"/api/threads/{uuid.uuid4()}/cancel").status_code == 404
