"""Every text input of the API and the new-run page has a maximum, refused by name."""

from typing import Any

import pytest
from django.test import Client

from agents.models import Event, Suspension, Thread
from tests.approvals import state
from tests.approvals.state import resume_url

EMAIL = [("send_email", {"to": "ops@example.com", "subject": "Hi"})]


def assert_refused(r: Any, field: str) -> None:
    assert r.status_code == 400, r.content
    body = r.json()
    assert body["error"] == "invalid" and body["detail"]
    assert field in body["fields"], body


class ThreadLimitsTestCase:
    @pytest.fixture(autouse=True)
    def setup(self, users: dict[str, Any], api: Any, settings: Any) -> None:
        self.users = users
        self.alice = api("reviewer")
        self.settings = settings
        state.agent("payer")

    def test_it_refuses_a_first_message_over_the_limit(self) -> None:
        limit = self.settings.MAX_MESSAGE_CHARS
        r = self.alice.post("/api/threads", {"agent": "payer", "message": "x" * (limit + 1)})
        assert_refused(r, "message")
        assert str(limit) in r.json()["fields"]["message"]
        assert not Thread.objects.exists() and not Event.objects.exists()

    def test_it_takes_a_first_message_at_the_limit(self) -> None:
        limit = self.settings.MAX_MESSAGE_CHARS
        r = self.alice.post("/api/threads", {"agent": "payer", "message": "é" * limit})
        assert r.status_code == 201, r.content

    def test_it_reads_the_limit_when_asked(self) -> None:
        self.settings.MAX_MESSAGE_CHARS = 10
        r = self.alice.post("/api/threads", {"agent": "payer", "message": "x" * 11})
        assert_refused(r, "message")

    def test_it_refuses_a_reply_over_the_limit(self) -> None:
        thread = state.thread(self.users["reviewer"], status=Thread.Status.WAITING_INPUT)
        before = Event.objects.count()
        r = self.alice.post(
            f"/api/threads/{thread.pk}/messages",
            {"text": "x" * (self.settings.MAX_MESSAGE_CHARS + 1)},
        )
        assert_refused(r, "text")
        thread.refresh_from_db()
        assert thread.status == Thread.Status.WAITING_INPUT
        assert Event.objects.count() == before


class DecisionLimitsTestCase:
    @pytest.fixture(autouse=True)
    def setup(self, users: dict[str, Any], api: Any, settings: Any) -> None:
        self.alice = api("reviewer")
        self.settings = settings
        self.users = users

    def assert_still_pending(self, s: Suspension) -> None:
        s.refresh_from_db()
        assert s.status == Suspension.Status.PENDING and s.decided_by is None
        assert not Event.objects.filter(suspension=s, type=Event.Type.SUSPENSION_DECIDED).exists()

    def test_it_refuses_a_reason_over_the_limit(self) -> None:
        _, [s] = state.suspended(self.users["operator"])
        reason = "x" * (self.settings.MAX_REASON_CHARS + 1)
        r = self.alice.post(resume_url(s), {"approved": False, "reason": reason})
        assert_refused(r, "reason")
        self.assert_still_pending(s)

    def test_it_takes_a_reason_at_the_limit(self) -> None:
        _, [s] = state.suspended(self.users["operator"])
        reason = "x" * self.settings.MAX_REASON_CHARS
        r = self.alice.post(resume_url(s), {"approved": False, "reason": reason})
        assert r.status_code == 202, r.content

    def test_it_refuses_an_answer_over_the_limit(self) -> None:
        _, [s] = state.suspended(
            self.users["operator"], calls=[("ask_user", {"question": "Which colour?"})]
        )
        answer = "x" * (self.settings.MAX_MESSAGE_CHARS + 1)
        r = self.alice.post(resume_url(s), {"response": answer})
        assert_refused(r, "response")
        self.assert_still_pending(s)

    def test_it_refuses_edited_arguments_over_the_limit(self) -> None:
        _, [s] = state.suspended(self.users["operator"], calls=EMAIL)
        limit = self.settings.MAX_ARGUMENTS_BYTES
        # Valid for the tool's schema: only the size is wrong.
        edited = {"to": "ops@example.com", "subject": "Hi", "body": "x" * limit}
        r = self.alice.post(resume_url(s), {"approved": True, "modifiedArgs": edited})
        assert_refused(r, "modifiedArgs")
        assert str(limit) in r.json()["fields"]["modifiedArgs"]
        self.assert_still_pending(s)

    def test_it_counts_edited_arguments_in_utf8_bytes(self) -> None:
        _, [s] = state.suspended(self.users["operator"], calls=EMAIL)
        # Under the limit in characters, over it in bytes: "€" is three bytes in UTF-8.
        body = "€" * (self.settings.MAX_ARGUMENTS_BYTES // 2)
        edited = {"to": "ops@example.com", "subject": "Hi", "body": body}
        r = self.alice.post(resume_url(s), {"approved": True, "modifiedArgs": edited})
        assert_refused(r, "modifiedArgs")

    def test_it_takes_edited_arguments_under_the_limit(self) -> None:
        _, [s] = state.suspended(self.users["operator"], calls=EMAIL)
        edited = {"to": "ops@example.com", "subject": "Hi", "body": "x" * 60000}
        r = self.alice.post(resume_url(s), {"approved": True, "modifiedArgs": edited})
        assert r.status_code == 202, r.content

    def test_it_answers_413_for_a_body_over_the_size_limit(self) -> None:
        _, [s] = state.suspended(self.users["operator"])
        body = {"approved": False, "reason": "x" * self.settings.DATA_UPLOAD_MAX_MEMORY_SIZE}
        r = self.alice.post(resume_url(s), body)
        assert r.status_code == 413
        assert r.json()["error"] == "too_large" and r.json()["detail"]
        self.assert_still_pending(s)


class NewRunPageLimitsTestCase:
    @pytest.fixture(autouse=True)
    def setup(self, users: dict[str, Any], settings: Any) -> None:
        self.settings = settings
        self.client = Client()
        self.client.force_login(users["reviewer"])
        state.agent("payer")

    def test_the_message_box_says_its_limit(self) -> None:
        self.settings.MAX_MESSAGE_CHARS = 1234
        r = self.client.get("/runs/new/")
        assert r.status_code == 200
        assert 'maxlength="1234"' in r.content.decode()

    def test_it_refuses_a_first_message_over_the_limit(self) -> None:
        message = "x" * (self.settings.MAX_MESSAGE_CHARS + 1)
        r = self.client.post("/runs/new/", {"agent": "payer", "message": message})
        assert r.status_code == 200
        assert "at most" in r.content.decode().lower()
        assert not Thread.objects.exists()

    def test_the_card_and_reply_boxes_say_their_limits(self) -> None:
        self.settings.MAX_MESSAGE_CHARS, self.settings.MAX_REASON_CHARS = 4321, 321
        thread, _ = state.suspended(None, calls=[("ask_user", {"question": "Which one?"})])
        for page in ("/", f"/threads/{thread.pk}/"):
            html = self.client.get(page).content.decode()
            assert 'name="reason" maxlength="321"' in html, page
            assert 'name="response" rows="3" maxlength="4321"' in html, page
        html = self.client.get(f"/threads/{thread.pk}/").content.decode()
        assert 'name="text" rows="3" maxlength="4321"' in html

    def test_it_starts_a_run_at_the_limit(self) -> None:
        message = "x" * self.settings.MAX_MESSAGE_CHARS
        r = self.client.post("/runs/new/", {"agent": "payer", "message": message})
        assert r.status_code == 302
        assert Thread.objects.count() == 1
