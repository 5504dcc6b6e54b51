"""POST /api/threads/{tid}/suspensions/{sid}/extend: a reviewer moves a pending deadline once,
by a bounded amount, with a reason; audited, the ladder moved with it."""

from datetime import timedelta
from typing import Any

import pytest

from agents import decisions, reminders
from agents.models import Event, Suspension
from tests.notify.raised import agent_file, leads, raise_group

EXTENDED = Event.Type.SUSPENSION_EXTENDED


def url(s: Suspension, thread_id: Any = None) -> str:
    return f"/api/threads/{thread_id or s.thread_id}/suspensions/{s.pk}/extend"


class ExtendTestCase:
    @pytest.fixture(autouse=True)
    def setup(self, users: dict[str, Any], load_agents: Any, api: Any, settings: Any) -> None:
        settings.MAX_EXTENSION_SECONDS = 3600
        self.users = users
        leads()
        load_agents(agent_file())
        _, [self.s, self.other] = raise_group(users["reviewer"])
        self.api = api

    def test_a_reviewer_extends_once_and_the_ladder_moves_with_the_deadline(self) -> None:
        old = self.s.expires_at

        r = self.api("teammate").post(url(self.s), {"seconds": 1800, "reason": "Asked finance"})

        assert r.status_code == 200, r.content
        body = r.json()
        s = Suspension.objects.get(pk=self.s.pk)
        assert s.expires_at == old + timedelta(seconds=1800)
        assert s.next_step_at == s.expires_at - timedelta(seconds=600)
        assert body["old_expires_at"] == old.isoformat()
        assert body["suspension"]["expires_at"] == s.expires_at.isoformat()
        assert body["extension"] == {
            "by": "bob",
            "at": s.extended_at.isoformat(),
            "seconds": 1800,
            "reason": "Asked finance",
        }
        event = Event.objects.get(type=EXTENDED)
        assert event.suspension_id == s.pk and event.actor_name == "bob"
        assert event.payload["reason"] == "Asked finance" and event.payload["by"] == "bob"
        assert event.payload["old_expires_at"] == old.isoformat()
        assert event.payload["expires_at"] == s.expires_at.isoformat()
        assert (
            event.payload["ladder"]["next_reminder_at"]
            == (s.expires_at - timedelta(seconds=600)).isoformat()
        )
        # The other call of the group keeps its own deadline.
        assert Suspension.objects.get(pk=self.other.pk).expires_at == old

        again = self.api("reviewer").post(url(self.s), {"seconds": 60, "reason": "More"})

        assert again.status_code == 409
        assert again.json()["error"] == "already_extended"
        assert "bob already extended" in again.json()["detail"]
        assert Suspension.objects.get(pk=self.s.pk).expires_at == s.expires_at
        assert Event.objects.filter(type=EXTENDED).count() == 1

    def test_reminders_still_ahead_of_the_new_deadline_go_again(self) -> None:
        near = self.s.expires_at - timedelta(seconds=60)
        reminders.apply_ladder_steps(now=near)
        assert Suspension.objects.get(pk=self.s.pk).reminders_sent == 2

        reminders.extend(self.s, self.users["reviewer"], 3600, "Need a manager", now=near)

        s = Suspension.objects.get(pk=self.s.pk)
        assert s.reminders_sent == 0 and s.escalated_at == near  # escalated stays escalated
        assert s.next_step_at == s.expires_at - timedelta(seconds=600)
        assert reminders.apply_ladder_steps(now=s.expires_at - timedelta(seconds=600)) == 1

    @pytest.mark.parametrize(
        "body, field",
        [
            ({"seconds": 0, "reason": "x"}, "seconds"),
            ({"seconds": 3601, "reason": "x"}, "seconds"),
            ({"seconds": "600", "reason": "x"}, "seconds"),
            ({"seconds": True, "reason": "x"}, "seconds"),
            ({"seconds": 60.5, "reason": "x"}, "seconds"),
            ({"seconds": 600}, "reason"),
            ({"seconds": 600, "reason": "   "}, "reason"),
            ({"seconds": 600, "reason": "x" * 2001}, "reason"),
            ({"seconds": 600, "reason": "x", "by": "mallory"}, "by"),
        ],
    )
    def test_it_refuses_bad_input_and_changes_nothing(self, body: Any, field: str) -> None:
        r = self.api("reviewer").post(url(self.s), body)

        assert r.status_code == 400
        assert field in r.json()["fields"]
        assert Suspension.objects.get(pk=self.s.pk).extended_at is None
        assert not Event.objects.filter(type=EXTENDED).exists()

    def test_it_refuses_a_decided_request(self) -> None:
        decisions.decide(self.s, self.users["reviewer"], {"approved": False, "reason": "no"})

        r = self.api("teammate").post(url(self.s), {"seconds": 60, "reason": "late"})

        assert r.status_code == 409
        assert r.json()["error"] == "not_pending"
        assert r.json()["suspension"]["decision"]["status"] == "rejected"
        assert not Event.objects.filter(type=EXTENDED).exists()

    def test_a_deadline_that_has_passed_is_applied_not_extended(self) -> None:
        Suspension.objects.filter(pk=self.s.pk).update(
            expires_at=self.s.created_at - timedelta(seconds=1)
        )

        r = self.api("reviewer").post(url(self.s), {"seconds": 60, "reason": "late"})

        assert r.status_code == 409 and r.json()["error"] == "not_pending"
        assert Suspension.objects.get(pk=self.s.pk).status == Suspension.Status.TIMED_OUT
        assert Event.objects.filter(type=Event.Type.SUSPENSION_TIMEOUT).count() == 1

    def test_only_people_who_may_decide_extend(self) -> None:
        body = {"seconds": 60, "reason": "x"}
        assert self.api(None).post(url(self.s), body).status_code == 401
        assert self.api("outsider").post(url(self.s), body).status_code == 403
        assert self.api("reviewer").post(url(self.s, self.other.pk), body).status_code == 404
        assert self.api("reviewer").get(url(self.s)).status_code == 405
        assert not Event.objects.filter(type=EXTENDED).exists()

    def test_a_browser_extends_with_its_session_and_csrf_token(self) -> None:
        from django.test import Client

        browser = Client(enforce_csrf_checks=True)
        browser.force_login(self.users["reviewer"])
        body = {"seconds": 60, "reason": "x"}
        refused = browser.post(url(self.s), body, content_type="application/json")
        assert refused.status_code == 403 and refused.json()["error"] == "csrf_failed"

        browser.get("/")  # the inbox sets the CSRF cookie
        token = browser.cookies["csrftoken"].value
        r = browser.post(
            url(self.s), body, content_type="application/json", headers={"X-CSRFToken": token}
        )
        assert r.status_code == 200

    def test_the_extension_is_in_the_audit_trail_and_on_the_card(self) -> None:
        self.api("reviewer").post(url(self.s), {"seconds": 900, "reason": "<b>Waiting</b> on CFO"})
        admin = self.api(None).client
        admin.force_login(self.users["admin"])

        trail = admin.get("/audit/").content.decode()

        assert "Deadline extended" in trail
        assert "by 15 min, from " in trail and "&lt;b&gt;Waiting&lt;/b&gt; on CFO" in trail
        inbox = self.api(None).client
        inbox.force_login(self.users["teammate"])
        page = inbox.get("/").content.decode()
        assert 'by <span class="extension-amount">15 min</span>' in page
        assert "&lt;b&gt;Waiting&lt;/b&gt; on CFO" in page and "<b>Waiting" not in page
