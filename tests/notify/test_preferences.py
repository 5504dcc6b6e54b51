"""The email page: a reviewer opts in for every agent or some; only deciders may."""

from typing import Any

import pytest
from django.test import Client

from agents.models import AgentDefinition
from notify.models import EmailOptIn


class PreferencesTestCase:
    @pytest.fixture(autouse=True)
    def setup(self, users: dict[str, Any], db: Any) -> None:
        self.users = users
        for name in ("payer", "ops"):
            AgentDefinition.objects.create(name=name, script=[{"text": "hi"}])

    def browser(self, who: str) -> Client:
        client = Client()
        client.force_login(self.users[who])
        return client

    def test_a_reviewer_opts_in_for_some_agents_then_for_every_agent(self) -> None:
        alice = self.browser("reviewer")
        page = alice.get("/email/")
        assert page.status_code == 200
        assert b"Your account has no email address" in page.content

        saved = alice.post("/email/", {"agent": ["ops", "nobody"]})
        assert saved.status_code == 302
        rows = EmailOptIn.objects.filter(user=self.users["reviewer"])
        assert [r.agent.name for r in rows] == ["ops"]
        assert b'value="ops" checked' in alice.get("/email/").content

        alice.post("/email/", {"every": "on", "agent": ["ops"]})
        assert [r.agent for r in rows.all()] == [None]

        alice.post("/email/", {})
        assert not rows.all().exists()

    def test_only_people_who_may_decide_opt_in(self) -> None:
        assert self.browser("outsider").get("/email/").status_code == 403
        assert self.browser("outsider").post("/email/", {"every": "on"}).status_code == 403
        anonymous = Client().get("/email/")
        assert anonymous.status_code == 302 and "/login/" in anonymous["Location"]
        assert not EmailOptIn.objects.exists()

    def test_it_needs_the_csrf_token(self) -> None:
        client = Client(enforce_csrf_checks=True)
        client.force_login(self.users["reviewer"])
        assert client.post("/email/", {"every": "on"}).status_code == 403
        assert not EmailOptIn.objects.exists()

    def test_the_admin_lists_and_edits_opt_ins(self) -> None:
        admin = self.browser("admin")
        assert admin.get("/admin/notify/emailoptin/").status_code == 200
        added = admin.post(
            "/admin/notify/emailoptin/add/",
            {"user": self.users["teammate"].pk, "agent": ""},
        )
        assert added.status_code == 302
        assert EmailOptIn.objects.get().user == self.users["teammate"]
        # The emails made are shown, never edited.
        assert admin.get("/admin/notify/email/").status_code == 200
        assert admin.get("/admin/notify/email/add/").status_code == 403
