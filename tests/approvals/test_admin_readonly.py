"""Runs are view-only in the admin, for superusers too; the demo reviewer is not staff."""

import re
from io import StringIO
from typing import Any

import pytest
from django.contrib.auth.models import User
from django.core.management import call_command
from django.test import Client

from agents.models import Event, StackFrame, Suspension, Thread
from tests.approvals import state


class AdminReadOnlyTestCase:
    @pytest.fixture(autouse=True)
    def setup(self, users: dict[str, Any]) -> None:
        self.client = Client()
        self.client.force_login(users["admin"])
        self.thread, [self.suspension] = state.suspended(users["operator"])
        self.frame = self.thread.frames.get()
        self.events = Event.objects.count()

    def assert_nothing_changed(self) -> None:
        thread = Thread.objects.get(pk=self.thread.pk)
        assert (thread.status, thread.result) == (Thread.Status.SUSPENDED, self.thread.result)
        s = Suspension.objects.get(pk=self.suspension.pk)
        assert s.status == Suspension.Status.PENDING and s.decided_by is None
        assert StackFrame.objects.filter(pk=self.frame.pk).exists()
        assert Event.objects.count() == self.events

    def test_it_refuses_a_superuser_changing_a_thread(self) -> None:
        url = f"/admin/agents/thread/{self.thread.pk}/change/"
        data = {
            "agent": self.thread.agent_id,
            "status": Thread.Status.COMPLETED,
            "title": "forged",
            "result": "paid",
            "frames-TOTAL_FORMS": "1",
            "frames-INITIAL_FORMS": "1",
            "frames-0-id": self.frame.pk,
            "frames-0-thread": self.thread.pk,
        }
        r = self.client.post(url, data)
        assert r.status_code == 403
        self.assert_nothing_changed()

    def test_it_shows_a_thread_without_a_form_to_change_it(self) -> None:
        r = self.client.get(f"/admin/agents/thread/{self.thread.pk}/change/")
        assert r.status_code == 200
        page = r.content.decode()
        assert 'name="status"' not in page and 'name="_save"' not in page

    @pytest.mark.parametrize("model", ["thread", "stackframe", "suspension", "event"])
    def test_it_refuses_the_add_page(self, model: str) -> None:
        assert self.client.get(f"/admin/agents/{model}/add/").status_code == 403
        assert self.client.post(f"/admin/agents/{model}/add/", {}).status_code == 403
        self.assert_nothing_changed()

    @pytest.mark.parametrize("model", ["thread", "stackframe", "suspension", "event"])
    def test_it_lists_the_rows_with_no_delete_action(self, model: str) -> None:
        r = self.client.get(f"/admin/agents/{model}/")
        assert r.status_code == 200
        assert "delete_selected" not in r.content.decode()

    def test_it_refuses_deleting_a_thread(self) -> None:
        url = f"/admin/agents/thread/{self.thread.pk}/delete/"
        assert self.client.post(url, {"post": "yes"}).status_code == 403
        assert self.client.post(
            "/admin/agents/thread/",
            {"action": "delete_selected", "_selected_action": [self.thread.pk], "post": "yes"},
        ).status_code in (200, 302)
        self.assert_nothing_changed()

    def test_it_refuses_a_superuser_changing_a_frame_or_a_suspension(self) -> None:
        r = self.client.post(
            f"/admin/agents/stackframe/{self.frame.pk}/change/", {"status": "done", "depth": 0}
        )
        assert r.status_code == 403
        r = self.client.post(
            f"/admin/agents/suspension/{self.suspension.pk}/change/", {"status": "approved"}
        )
        assert r.status_code == 403
        self.assert_nothing_changed()


class DemoAccountsTestCase:
    @pytest.fixture(autouse=True)
    def fast_hasher(self, settings: Any) -> None:
        settings.PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]

    def test_the_demo_reviewer_is_not_staff(self, db: Any) -> None:
        User.objects.create_user("reviewer", is_staff=True)  # as an older `make run` left it
        out = StringIO()
        call_command("demo_reviewer", stdout=out)
        user = User.objects.get(username="reviewer")
        assert not user.is_staff and not user.is_superuser
        login, password = re.search(r"Login:\s+(\S+) / (\S+)", out.getvalue()).groups()
        client = Client()
        assert client.login(username=login, password=password)
        assert client.get("/audit/").status_code == 403
        assert client.get("/").status_code == 200

    def test_the_demo_admin_reads_the_audit_trail_and_the_admin(self, db: Any) -> None:
        out = StringIO()
        call_command("demo_admin", stdout=out)
        printed = out.getvalue()
        assert "/admin/" in printed and "audit" in printed
        assert "Login:" not in printed  # the reviewer's label, which tests/test_readme.py reads
        login, password = re.search(r"Admin:\s+(\S+) / (\S+)", printed).groups()
        client = Client()
        assert client.login(username=login, password=password)
        assert client.get("/audit/").status_code == 200
        assert client.get("/admin/").status_code == 200
        assert client.get("/admin/agents/thread/add/").status_code == 403

    def test_the_demo_admin_gets_a_fresh_password_each_time(self, db: Any) -> None:
        first, second = StringIO(), StringIO()
        call_command("demo_admin", stdout=first)
        call_command("demo_admin", stdout=second)
        assert first.getvalue() != second.getvalue()
        assert User.objects.filter(username="admin").count() == 1
