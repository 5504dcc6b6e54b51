"""resumeExecution: POST /api/threads/{thread_id}/suspensions/{suspension_id}/resume."""

import uuid
from datetime import timedelta
from typing import Any

import pytest
from django.utils import timezone

from agents.models import Event, Suspension, Thread
from tests.approvals import state
from tests.approvals.state import resume_url


def decided_events(s: Suspension) -> int:
    return Event.objects.filter(suspension=s, type=Event.Type.SUSPENSION_DECIDED).count()


class ResumeTestCase:
    @pytest.fixture(autouse=True)
    def setup(self, users: dict[str, Any], api: Any) -> None:
        self.users = users
        self.alice = api("reviewer")
        self.bob = api("teammate")
        self.thread, [self.s] = state.suspended(users["operator"])
        self.url = resume_url(self.s)

    def assert_nothing_changed(self) -> None:
        self.s.refresh_from_db()
        assert self.s.status == Suspension.Status.PENDING
        assert self.s.decided_by is None and self.s.approved is None
        assert decided_events(self.s) == 0
        assert Thread.objects.get(pk=self.thread.pk).status == Thread.Status.SUSPENDED

    def test_it_accepts_an_approval(self) -> None:
        r = self.alice.post(self.url, {"approved": True})
        assert r.status_code == 202, r.content
        body = r.json()
        assert body["outcome"]["status"] == "approved"
        assert body["outcome"]["decided_by"] == "alice"
        assert body["suspension"]["id"] == str(self.s.pk)
        self.s.refresh_from_db()
        assert self.s.status == Suspension.Status.APPROVED and self.s.approved is True
        assert self.s.decided_by == self.users["reviewer"] and self.s.decided_at is not None
        [event] = Event.objects.filter(suspension=self.s, type=Event.Type.SUSPENSION_DECIDED)
        assert event.actor == self.users["reviewer"] and event.payload["status"] == "approved"
        # The only suspension of its group is decided: the thread is runnable again.
        assert Thread.objects.get(pk=self.thread.pk).status == Thread.Status.RUNNING

    def test_it_records_a_rejection_with_its_reason(self) -> None:
        r = self.alice.post(self.url, {"approved": False, "reason": "wrong supplier"})
        assert r.status_code == 202
        self.s.refresh_from_db()
        assert self.s.status == Suspension.Status.REJECTED
        assert self.s.approved is False and self.s.reason == "wrong supplier"

    def test_it_records_edited_arguments(self) -> None:
        edited = {"from_account": "A-1", "to_account": "B-2", "amount": 150, "currency": "USD"}
        r = self.alice.post(self.url, {"approved": True, "modifiedArgs": edited})
        assert r.status_code == 202
        assert r.json()["outcome"]["modifiedArgs"] == edited
        self.s.refresh_from_db()
        assert self.s.modified_args == edited

    def test_decided_by_is_the_caller_whatever_the_body_says(self) -> None:
        r = self.bob.post(self.url, {"approved": True, "decided_by": "alice"})
        assert r.status_code == 400
        assert "decided_by" in r.json()["fields"]
        self.assert_nothing_changed()

        assert self.bob.post(self.url, {"approved": True}).status_code == 202
        self.s.refresh_from_db()
        assert self.s.decided_by == self.users["teammate"]
        assert (
            Event.objects.get(suspension=self.s, type="SUSPENSION_DECIDED").actor.username == "bob"
        )

    # -- refused requests change nothing ----------------------------------------------------

    def test_it_refuses_malformed_json(self) -> None:
        for raw in ('{"approved": tru', "", "[true]", '"yes"'):
            r = self.alice.post(self.url, raw=raw)
            assert r.status_code == 400, raw
            assert r.json()["error"] == "invalid_json" and r.json()["detail"]
        self.assert_nothing_changed()

    def test_it_refuses_a_body_over_the_size_limit(self, settings: Any) -> None:
        settings.DATA_UPLOAD_MAX_MEMORY_SIZE = 1000
        r = self.alice.post(self.url, {"approved": False, "reason": "x" * 2000})
        assert r.status_code == 413
        assert r.json()["error"] == "too_large" and r.json()["detail"]
        self.assert_nothing_changed()

    def test_an_unknown_suspension_is_not_found(self) -> None:
        r = self.alice.post(
            resume_url(self.s).replace(str(self.s.pk), str(uuid.uuid4())), {"approved": True}
        )
        assert r.status_code == 404
        assert r.json()["error"] == "not_found" and r.json()["detail"]
        self.assert_nothing_changed()

    def test_a_non_uuid_id_is_not_found(self) -> None:
        for url in (
            f"/api/threads/{self.thread.pk}/suspensions/not-a-uuid/resume",
            f"/api/threads/not-a-uuid/suspensions/{self.s.pk}/resume",
            "/api/threads/123/suspensions/456/resume",
        ):
            r = self.alice.post(url, {"approved": True})
            assert r.status_code == 404, url
            assert r.json()["error"] == "not_found"
        self.assert_nothing_changed()

    def test_a_suspension_under_another_threads_url_is_not_found(self) -> None:
        other, _ = state.suspended(self.users["operator"])
        r = self.alice.post(resume_url(self.s, thread_id=other.pk), {"approved": True})
        assert r.status_code == 404
        assert r.json()["error"] == "not_found"
        self.assert_nothing_changed()

    def test_an_anonymous_caller_is_refused(self, api: Any) -> None:
        r = api(None).post(self.url, {"approved": True})
        assert r.status_code == 401
        assert r.json()["error"] == "unauthenticated" and r.json()["detail"]
        self.assert_nothing_changed()

    def test_an_outsider_is_refused(self, api: Any) -> None:
        r = api("outsider").post(self.url, {"approved": True})
        assert r.status_code == 403
        assert r.json()["error"] == "forbidden"
        self.assert_nothing_changed()

    @pytest.mark.parametrize(
        "body, field",
        [
            ({"approved": True, "note": "x"}, "note"),
            ({}, "approved"),
            ({"approved": "yes"}, "approved"),
            ({"approved": 1}, "approved"),
            ({"approved": None}, "approved"),
            ({"approved": False, "reason": 42}, "reason"),
            ({"approved": False, "reason": ["no"]}, "reason"),
            ({"approved": True, "modifiedArgs": [1, 2]}, "modifiedArgs"),
            ({"approved": True, "modifiedArgs": "amount=5"}, "modifiedArgs"),
        ],
    )
    def test_it_refuses_an_invalid_decision_with_field_errors(self, body: dict, field: str) -> None:
        r = self.alice.post(self.url, body)
        assert r.status_code == 400, r.content
        data = r.json()
        assert data["error"] == "invalid" and data["detail"]
        assert field in data["fields"], data
        self.assert_nothing_changed()

    @pytest.mark.parametrize(
        "edited, field",
        [
            ({"from_account": "A-1", "to_account": "B-2", "amount": "lots"}, "modifiedArgs.amount"),
            ({"from_account": "A-1", "to_account": "B-2", "amount": -5}, "modifiedArgs.amount"),
            ({"from_account": "A-1", "to_account": "B-2"}, "modifiedArgs.amount"),
            ({"from_account": "", "to_account": "B-2", "amount": 5}, "modifiedArgs.from_account"),
            (
                {"from_account": "A-1", "to_account": "B-2", "amount": 5, "currency": "XXX"},
                "modifiedArgs.currency",
            ),
            (
                {"from_account": "A-1", "to_account": "B-2", "amount": 5, "memo": "hi"},
                "modifiedArgs.memo",
            ),
        ],
    )
    def test_modified_args_must_fit_the_tools_schema(self, edited: dict, field: str) -> None:
        r = self.alice.post(self.url, {"approved": True, "modifiedArgs": edited})
        assert r.status_code == 400, r.content
        assert field in r.json()["fields"], r.json()
        self.assert_nothing_changed()
        # The reviewer fixes the edit and the same suspension takes it.
        assert (
            self.alice.post(
                self.url, {"approved": True, "modifiedArgs": state.TRANSFER}
            ).status_code
            == 202
        )

    def test_modified_args_only_go_with_an_approval(self) -> None:
        r = self.alice.post(self.url, {"approved": False, "modifiedArgs": state.TRANSFER})
        assert r.status_code == 400
        assert "modifiedArgs" in r.json()["fields"]
        self.assert_nothing_changed()

    def test_a_confirmation_refuses_a_response_its_policy_does_not_allow(self) -> None:
        # allow_respond is off by default (agents.policy): the reviewer must decide.
        r = self.alice.post(self.url, {"response": "sure"})
        assert r.status_code == 403
        assert r.json()["error"] == "forbidden_by_policy" and r.json()["rule"] == "not_allowed"
        assert "transfer_funds" in r.json()["detail"]
        self.assert_nothing_changed()

    # -- repeats and conflicts ----------------------------------------------------------------

    def test_the_same_decision_twice_is_answered_with_the_recorded_outcome(self) -> None:
        first = self.alice.post(self.url, {"approved": False, "reason": "not now"})
        again = self.alice.post(self.url, {"approved": False, "reason": "not now"})
        assert (first.status_code, again.status_code) == (202, 200)
        assert again.json()["outcome"] == first.json()["outcome"]
        assert again.json()["outcome"]["decided_by"] == "alice"
        assert decided_events(self.s) == 1

    def test_a_teammate_repeating_the_decision_does_not_take_it_over(self) -> None:
        assert self.alice.post(self.url, {"approved": True}).status_code == 202
        r = self.bob.post(self.url, {"approved": True})
        assert r.status_code == 200
        assert r.json()["outcome"]["decided_by"] == "alice"
        self.s.refresh_from_db()
        assert self.s.decided_by == self.users["reviewer"]

    def test_a_conflicting_decision_is_refused_with_who_decided(self) -> None:
        assert self.alice.post(self.url, {"approved": True}).status_code == 202
        for body in (
            {"approved": False, "reason": "no"},
            {"approved": True, "reason": "other"},
            {"approved": True, "modifiedArgs": {**state.TRANSFER, "amount": 1}},
        ):
            r = self.bob.post(self.url, body)
            assert r.status_code == 409, body
            data = r.json()
            assert data["error"] == "already_decided" and "alice" in data["detail"]
            assert data["outcome"]["status"] == "approved"
            assert data["outcome"]["decided_by"] == "alice"
        self.s.refresh_from_db()
        assert self.s.status == Suspension.Status.APPROVED and self.s.reason == ""
        assert decided_events(self.s) == 1

    def test_an_invalid_body_after_the_decision_is_still_a_400(self) -> None:
        assert self.alice.post(self.url, {"approved": True}).status_code == 202
        r = self.bob.post(self.url, {"approved": "maybe"})
        assert r.status_code == 400 and "approved" in r.json()["fields"]

    def test_a_decision_after_the_deadline_is_refused_and_the_deadline_wins(self) -> None:
        Suspension.objects.filter(pk=self.s.pk).update(
            expires_at=timezone.now() - timedelta(seconds=1)
        )
        r = self.alice.post(self.url, {"approved": True})
        assert r.status_code == 409, r.content
        data = r.json()
        assert data["outcome"]["status"] == "timed_out"
        assert data["outcome"]["approved"] is False and data["outcome"]["decided_by"] is None
        assert "deadline" in data["detail"]
        self.s.refresh_from_db()
        assert self.s.status == Suspension.Status.TIMED_OUT and self.s.decided_by is None
        assert (
            Event.objects.filter(suspension=self.s, type=Event.Type.SUSPENSION_TIMEOUT).count() == 1
        )
        assert decided_events(self.s) == 0
        # The run goes on with the rejection, as the sweeper would have done.
        assert Thread.objects.get(pk=self.thread.pk).status == Thread.Status.RUNNING
        # Asking again gets the same answer and writes nothing more.
        assert self.alice.post(self.url, {"approved": True}).status_code == 409
        assert Event.objects.filter(suspension=self.s).count() == 2  # AGENT_SUSPENDED, TIMEOUT

    def test_the_clock_passing_the_deadline_wins_over_a_late_decision(
        self, time_machine: Any
    ) -> None:
        thread, [s] = state.suspended(
            self.users["operator"], expires_in=60, on_timeout=Suspension.OnTimeout.APPROVE
        )
        time_machine.move_to(s.expires_at + timedelta(seconds=1), tick=False)
        r = self.alice.post(resume_url(s), {"approved": False, "reason": "too late"})
        assert r.status_code == 409
        assert r.json()["outcome"]["status"] == "timed_out"
        assert r.json()["outcome"]["approved"] is True  # on_timeout: approve
        s.refresh_from_db()
        assert s.status == Suspension.Status.TIMED_OUT and s.approved is True
        assert Event.objects.filter(suspension=s, type=Event.Type.SUSPENSION_TIMEOUT).count() == 1

    def test_a_decision_just_before_the_deadline_is_taken(self, time_machine: Any) -> None:
        time_machine.move_to(self.s.expires_at - timedelta(seconds=1), tick=False)
        assert self.alice.post(self.url, {"approved": True}).status_code == 202

    def test_a_cancelled_suspension_refuses_a_decision(self) -> None:
        assert self.bob.post(f"/api/threads/{self.thread.pk}/cancel").status_code == 200
        r = self.alice.post(self.url, {"approved": True})
        assert r.status_code == 409
        assert r.json()["outcome"]["status"] == "cancelled"
        assert r.json()["outcome"]["decided_by"] == "bob"
        assert decided_events(self.s) == 0


class GroupResumeTestCase:
    def test_the_thread_runs_again_only_when_the_whole_group_is_decided(
        self, users: dict[str, Any], api: Any
    ) -> None:
        alice = api("reviewer")
        thread, [first, second] = state.suspended(
            users["operator"],
            calls=[
                ("send_email", {"to": "one@example.com", "subject": "First"}),
                ("send_email", {"to": "two@example.com", "subject": "Second"}),
            ],
        )
        assert alice.post(resume_url(first), {"approved": True}).status_code == 202
        assert Thread.objects.get(pk=thread.pk).status == Thread.Status.SUSPENDED
        assert alice.post(resume_url(second), {"approved": False}).status_code == 202
        assert Thread.objects.get(pk=thread.pk).status == Thread.Status.RUNNING
        first.refresh_from_db()
        second.refresh_from_db()
        assert (first.status, second.status) == ("approved", "rejected")


class InputResumeTestCase:
    @pytest.fixture(autouse=True)
    def setup(self, users: dict[str, Any], api: Any) -> None:
        self.alice = api("reviewer")
        self.bob = api("teammate")
        self.thread, [self.s] = state.suspended(
            users["operator"], calls=[("ask_user", {"question": "Which colour?"})]
        )
        self.url = resume_url(self.s)

    def test_it_takes_a_free_text_response(self) -> None:
        r = self.alice.post(self.url, {"response": "Blue, please."})
        assert r.status_code == 202
        assert r.json()["outcome"]["response"] == "Blue, please."
        self.s.refresh_from_db()
        assert self.s.kind == "input" and self.s.status == Suspension.Status.APPROVED
        assert self.s.response == "Blue, please." and self.s.decided_by.username == "alice"
        assert Thread.objects.get(pk=self.thread.pk).status == Thread.Status.RUNNING

    def test_it_can_be_declined_with_a_reason(self) -> None:
        r = self.alice.post(self.url, {"approved": False, "reason": "ask ops"})
        assert r.status_code == 202
        self.s.refresh_from_db()
        assert self.s.status == Suspension.Status.REJECTED and self.s.response is None
        assert (
            self.alice.post(self.url, {"approved": False, "reason": "ask ops"}).status_code == 200
        )
        assert self.alice.post(self.url, {"response": "Blue"}).status_code == 409

    def test_the_same_answer_twice_is_idempotent_and_another_conflicts(self) -> None:
        assert self.alice.post(self.url, {"response": "Blue"}).status_code == 202
        assert self.alice.post(self.url, {"response": "Blue"}).status_code == 200
        r = self.bob.post(self.url, {"response": "Red"})
        assert r.status_code == 409
        assert r.json()["outcome"]["response"] == "Blue"
        assert r.json()["outcome"]["decided_by"] == "alice"
        assert decided_events(self.s) == 1

    @pytest.mark.parametrize(
        "body, field",
        [
            ({"response": ""}, "response"),
            ({"response": "   "}, "response"),
            ({"response": 5}, "response"),
            ({"response": "Blue", "approved": True}, "approved"),
            ({"approved": True}, "response"),
            ({"approved": True, "reason": "fine"}, "response"),
            ({"approved": False, "modifiedArgs": {"question": "Other?"}}, "modifiedArgs"),
        ],
    )
    def test_it_refuses_a_bad_response(self, body: dict, field: str) -> None:
        r = self.alice.post(self.url, body)
        assert r.status_code == 400
        assert field in r.json()["fields"]
        self.s.refresh_from_db()
        assert self.s.status == Suspension.Status.PENDING
        assert decided_events(self.s) == 0
