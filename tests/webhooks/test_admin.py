"""Webhooks in the admin: subscriptions made and changed through the audited actions, URLs
checked; the delivery log with its attempts; replay of selected deliveries."""

from typing import Any

import pytest
from django.test import Client

from agents import events
from agents.models import Event
from webhooks import fanout
from webhooks.models import Delivery, Subscription
from webhooks.outbox import Outbox


@pytest.mark.django_db(transaction=True)
class WebhooksAdminTestCase:
    @pytest.fixture(autouse=True)
    def setup(self, users: dict[str, Any], webhook_settings: Any, receiver: Any) -> None:
        self.users = users
        self.settings = webhook_settings
        self.client = Client()
        self.client.force_login(users["admin"])
        self.receiver = receiver

    def add(self, url: str, **extra: Any) -> Any:
        data = {"url": url, "description": "", "agent": "", "secret": "", "enabled": "on"}
        return self.client.post("/admin/webhooks/subscription/add/", {**data, **extra})

    def test_a_subscription_made_in_the_admin_gets_a_secret_and_an_event(self) -> None:
        r = self.add("http://127.0.0.1:9/in", event_types=["THREAD_COMPLETED", "THREAD_FAILED"])
        assert r.status_code == 302, r.content.decode()[-2000:]
        s = Subscription.objects.get()
        assert s.secret.startswith("whsec_") and s.owner == self.users["admin"]
        assert s.event_types == ["THREAD_COMPLETED", "THREAD_FAILED"]
        created = Event.objects.get(type="WEBHOOK_CREATED")
        assert created.actor == self.users["admin"]
        r = self.client.post(
            f"/admin/webhooks/subscription/{s.pk}/change/",
            {
                "url": s.url,
                "description": "ops",
                "agent": "",
                "secret": s.secret,
                "event_types": s.event_types,
            },
        )
        assert r.status_code == 302
        s.refresh_from_db()
        assert not s.enabled and s.description == "ops"
        changed = Event.objects.get(type="WEBHOOK_CHANGED")
        assert changed.payload["changed"] == ["description", "enabled"]
        r = self.client.post(f"/admin/webhooks/subscription/{s.pk}/delete/", {"post": "yes"})
        assert r.status_code == 302 and not Subscription.objects.exists()
        assert Event.objects.filter(type="WEBHOOK_DELETED").count() == 1

    def test_the_admin_refuses_a_private_address_and_a_bad_secret(self) -> None:
        self.settings.WEBHOOKS_ALLOW_PRIVATE = False
        r = self.add("http://169.254.169.254/latest", secret="not-a-secret")
        assert r.status_code == 200
        assert "link-local address" in r.content.decode()
        assert "whsec_" in r.content.decode()
        assert not Subscription.objects.exists()

    def test_the_log_shows_attempts_and_replays_a_selection(self) -> None:
        self.settings.WEBHOOKS_RETRY_SCHEDULE = []
        r = self.receiver(fail_first=1)
        s = Subscription.objects.create(url=r.url, owner=self.users["admin"])
        r.secret = s.secret
        events.record("AGENT_MESSAGE", payload={"text": "hi"})
        fanout.fan_out_all()
        d = Delivery.objects.get()
        assert Outbox().send(d.pk, d.lock_token) == "dead-lettered"
        page = self.client.get("/admin/webhooks/delivery/").content.decode()
        assert d.webhook_id in page and "HTTP 500" in page
        page = self.client.get(f"/admin/webhooks/delivery/{d.pk}/change/").content.decode()
        assert "not now" in page  # the receiver's answer, in the attempt's row
        assert (
            "Replay the selected deliveries"
            in self.client.get("/admin/webhooks/delivery/").content.decode()
        )
        r2 = self.client.post(
            "/admin/webhooks/delivery/", {"action": "replay", "_selected_action": [d.pk]}
        )
        assert r2.status_code == 302
        d.refresh_from_db()
        assert d.status == "pending" and d.retries == 0
        assert Event.objects.get(type="WEBHOOK_REPLAYED").actor == self.users["admin"]
        assert Outbox().send(d.pk, d.lock_token) == "succeeded"
        assert r.ids() == [d.webhook_id, d.webhook_id] and all(g.verified for g in r.requests)

    def test_a_reviewer_cannot_open_the_webhooks_admin(self) -> None:
        client = Client()
        client.force_login(self.users["reviewer"])
        assert client.get("/admin/webhooks/delivery/").status_code == 302  # to the login
        assert client.get("/admin/webhooks/subscription/").status_code == 302
