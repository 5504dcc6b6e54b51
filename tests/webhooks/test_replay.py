"""Replays from the delivery log, one delivery or a time range: the same webhook-id, the
schedule from its start, audited; only staff with the permission may ask."""

from datetime import timedelta
from typing import Any

import pytest
from django.utils import timezone

from agents import events
from agents.models import Event
from webhooks import fanout
from webhooks.models import Delivery, Subscription
from webhooks.outbox import Outbox


@pytest.mark.django_db(transaction=True)
class ReplayTestCase:
    @pytest.fixture(autouse=True)
    def setup(self, users: dict[str, Any], api: Any, webhook_settings: Any, receiver: Any) -> None:
        webhook_settings.WEBHOOKS_RETRY_SCHEDULE = []  # the first failure dead-letters
        webhook_settings.WEBHOOKS_DISABLE_AFTER = 0
        self.users = users
        self.admin = api("admin")
        fanout.fan_out_all()
        self.s = Subscription.objects.create(url="", owner=users["admin"])
        # Down for the first attempt of each delivery, then up.
        self.receiver = receiver(secret=self.s.secret, fail_first=1)
        Subscription.objects.filter(pk=self.s.pk).update(url=self.receiver.url)
        for i in range(2):
            events.record("AGENT_MESSAGE", payload={"n": i})
        fanout.fan_out_all()
        self.dead = list(Delivery.objects.order_by("id"))
        for d in self.dead:
            assert Outbox().send(d.pk, d.lock_token) == "dead-lettered"

    def send_pending(self) -> None:
        for d in Delivery.objects.filter(status="pending"):
            assert Outbox().send(d.pk, d.lock_token) == "succeeded"

    def test_one_delivery_is_replayed_with_its_webhook_id(self) -> None:
        d = self.dead[0]
        r = self.admin.post(f"/api/webhooks/deliveries/{d.pk}/replay")
        assert r.status_code == 202, r.content
        assert r.json()["status"] == "pending" and r.json()["webhook_id"] == d.webhook_id
        replayed = Event.objects.get(type="WEBHOOK_REPLAYED")
        assert replayed.actor == self.users["admin"] and replayed.payload["deliveries"] == 1
        self.send_pending()
        assert self.receiver.ids() == [d.webhook_id, self.dead[1].webhook_id, d.webhook_id]
        assert self.receiver.ids(status=200) == [d.webhook_id]
        assert all(g.verified for g in self.receiver.requests)
        log = self.admin.get(f"/api/webhooks/deliveries/{d.pk}").json()
        assert log["status"] == "succeeded" and log["attempts"] == 2
        assert [(a["status_code"], a["succeeded"]) for a in log["attempt_log"]] == [
            (500, False),
            (200, True),
        ]

    def test_a_time_range_is_replayed(self) -> None:
        url = f"/api/webhooks/{self.s.pk}/replay"
        now = timezone.now()
        later = {"since": (now + timedelta(hours=1)).isoformat(), "until": "2099-01-01T00:00Z"}
        r = self.admin.post(url, later)
        assert r.status_code == 202 and r.json() == {"replayed": 0}
        r = self.admin.post(url, {"since": (now - timedelta(hours=1)).isoformat()})
        assert r.status_code == 202 and r.json() == {"replayed": 2}
        self.send_pending()
        assert sorted(self.receiver.ids(status=200)) == sorted(d.webhook_id for d in self.dead)
        # The succeeded ones are replayed only when asked for.
        since = (now - timedelta(hours=1)).isoformat()
        assert self.admin.post(url, {"since": since}).json() == {"replayed": 0}
        r = self.admin.post(url, {"since": since, "status": ["succeeded"]})
        assert r.json() == {"replayed": 2}
        # One event per replay that sent something; a replay of nothing changed nothing.
        assert Event.objects.filter(type="WEBHOOK_REPLAYED").count() == 2

    def test_the_log_pages_newest_first(self) -> None:
        r = self.admin.get(f"/api/webhooks/{self.s.pk}/deliveries", limit=1)
        body = r.json()
        assert [d["id"] for d in body["results"]] == [self.dead[1].pk]
        assert body["results"][0]["last_error"] == "HTTP 500"
        more = self.admin.client.get(body["next"], headers=self.admin.headers).json()
        assert [d["id"] for d in more["results"]] == [self.dead[0].pk] and more["next"] is None
        failed = self.admin.get(f"/api/webhooks/{self.s.pk}/deliveries", status="failed").json()
        assert len(failed["results"]) == 2

    @pytest.mark.parametrize(
        "body",
        [
            {},
            {"since": "yesterday"},
            {"since": "2026-01-02T00:00", "until": "2026-01-01T00:00"},
            {"since": "2026-01-01T00:00", "status": ["lost"]},
            {"since": "2026-01-01", "x": 1},
        ],
    )
    def test_a_bad_range_is_refused(self, body: dict[str, Any]) -> None:
        r = self.admin.post(f"/api/webhooks/{self.s.pk}/replay", body)
        assert r.status_code == 400, r.content
        assert not Event.objects.filter(type="WEBHOOK_REPLAYED").exists()

    def test_a_disabled_subscription_is_not_replayed(self) -> None:
        Subscription.objects.filter(pk=self.s.pk).update(enabled=False)
        r = self.admin.post(f"/api/webhooks/deliveries/{self.dead[0].pk}/replay")
        assert r.status_code == 409
        r = self.admin.post(f"/api/webhooks/{self.s.pk}/replay", {"since": "2020-01-01T00:00"})
        assert r.status_code == 409
        assert Delivery.objects.filter(status="failed").count() == 2
