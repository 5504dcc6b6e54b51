"""/api/webhooks: staff manage subscriptions; every change is audited; URLs are checked."""

import json
from typing import Any

import pytest
from django.contrib.auth.models import Permission, User
from standardwebhooks import Webhook

from agents.models import AgentDefinition, Event
from tests.conftest import Api
from webhooks.models import Subscription

URL = "http://127.0.0.1:9/hooks"


def patch(client: Api, path: str, data: Any) -> Any:
    return client.client.patch(
        path, json.dumps(data), content_type="application/json", headers=client.headers
    )


def delete(client: Api, path: str) -> Any:
    return client.client.delete(path, headers=client.headers)


@pytest.mark.django_db
class SubscriptionsApiTestCase:
    @pytest.fixture(autouse=True)
    def setup(self, users: dict[str, Any], api: Any, webhook_settings: Any) -> None:
        self.users = users
        self.admin = api("admin")
        AgentDefinition.objects.create(name="payer", model="scripted")

    def create(self, **data: Any) -> Any:
        return self.admin.post("/api/webhooks", {"url": URL, **data})

    def test_it_creates_a_subscription_with_a_standard_webhooks_secret(self) -> None:
        r = self.create(event_types=["THREAD_COMPLETED"], agent="payer", description="ops")
        assert r.status_code == 201, r.content
        body = r.json()
        assert body["url"] == URL and body["event_types"] == ["THREAD_COMPLETED"]
        assert body["agent"] == "payer" and body["enabled"] is True and body["owner"] == "admin"
        assert body["secret"].startswith("whsec_")
        # The secret works with the reference library.
        Webhook(body["secret"])
        s = Subscription.objects.get(pk=body["id"])
        assert s.owner == self.users["admin"] and s.secret == body["secret"]
        event = Event.objects.get(type="WEBHOOK_CREATED")
        assert event.actor == self.users["admin"]
        assert event.payload["subscription"] == body["id"] and event.payload["host"] == "127.0.0.1"
        assert "secret" not in json.dumps(event.payload)

    def test_it_keeps_a_secret_given_in_the_standard_format(self) -> None:
        secret = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"
        r = self.create(secret=secret)
        assert r.status_code == 201, r.content
        assert Subscription.objects.get(pk=r.json()["id"]).secret == secret

    @pytest.mark.parametrize(
        ("data", "field"),
        [
            ({"url": "ftp://example.com/x"}, "url"),
            ({"url": "not a url"}, "url"),
            ({"secret": "plain-secret"}, "secret"),
            ({"secret": "whsec_c2hvcnQ="}, "secret"),
            ({"event_types": ["NO_SUCH_EVENT"]}, "event_types"),
            ({"event_types": "THREAD_COMPLETED"}, "event_types"),
            ({"agent": "nobody"}, "agent"),
            ({"enabled": "yes"}, "enabled"),
            ({"colour": "red"}, "colour"),
        ],
    )
    def test_it_refuses_invalid_fields(self, data: dict[str, Any], field: str) -> None:
        r = self.create(**data)
        assert r.status_code == 400, r.content
        assert field in r.json()["fields"]
        assert not Subscription.objects.exists()
        assert not Event.objects.filter(type="WEBHOOK_CREATED").exists()

    def test_it_lists_gets_changes_and_deletes(self) -> None:
        pk = self.create().json()["id"]
        listed = self.admin.get("/api/webhooks").json()["results"]
        assert [s["id"] for s in listed] == [pk] and "secret" not in listed[0]
        second = self.create().json()["id"]
        page = self.admin.get("/api/webhooks", limit=1).json()
        assert [s["id"] for s in page["results"]] == [pk]
        rest = self.admin.client.get(page["next"], headers=self.admin.headers).json()
        assert [s["id"] for s in rest["results"]] == [second] and rest["next"] is None
        assert delete(self.admin, f"/api/webhooks/{second}").status_code == 204
        assert self.admin.get(f"/api/webhooks/{pk}").json()["secret"].startswith("whsec_")
        r = patch(self.admin, f"/api/webhooks/{pk}", {"enabled": False, "event_types": []})
        assert r.status_code == 200, r.content
        assert r.json()["enabled"] is False and "secret" not in r.json()
        changed = Event.objects.get(type="WEBHOOK_CHANGED")
        assert changed.payload["changed"] == ["enabled"] and changed.actor == self.users["admin"]
        r = patch(self.admin, f"/api/webhooks/{pk}", {"agent": "nobody"})
        assert r.status_code == 400 and "agent" in r.json()["fields"]
        assert delete(self.admin, f"/api/webhooks/{pk}").status_code == 204
        assert not Subscription.objects.exists()
        deleted = Event.objects.filter(type="WEBHOOK_DELETED").order_by("id")
        assert [e.payload["subscription"] for e in deleted] == [second, pk]
        assert self.admin.get(f"/api/webhooks/{pk}").status_code == 404
        assert self.admin.get("/api/webhooks/not-a-uuid").status_code == 404

    def test_a_new_secret_is_made_when_an_empty_one_is_sent(self) -> None:
        body = self.create().json()
        r = patch(self.admin, f"/api/webhooks/{body['id']}", {"secret": ""})
        assert r.status_code == 200
        assert r.json()["secret"].startswith("whsec_") and r.json()["secret"] != body["secret"]
        assert Event.objects.get(type="WEBHOOK_CHANGED").payload["changed"] == ["secret"]

    def test_it_answers_nobody_but_staff_with_the_permission(self, api: Any) -> None:
        pk = self.create().json()["id"]
        assert api(None).get("/api/webhooks").status_code == 401
        assert api(None).post("/api/webhooks", {"url": URL}).status_code == 401
        for who in ("reviewer", "outsider"):
            client = api(who)
            assert client.get("/api/webhooks").status_code == 403
            assert client.post("/api/webhooks", {"url": URL}).status_code == 403
            assert client.get(f"/api/webhooks/{pk}").status_code == 403
            assert delete(client, f"/api/webhooks/{pk}").status_code == 403
            assert client.get(f"/api/webhooks/{pk}/deliveries").status_code == 403
            since = {"since": "2020-01-01T00:00"}
            assert client.post(f"/api/webhooks/{pk}/replay", since).status_code == 403
            assert client.post("/api/webhooks/deliveries/1/replay").status_code == 403
        staff = User.objects.create_user("staffer", password="x", is_staff=True)
        viewer = Api(staff)
        assert viewer.get("/api/webhooks").status_code == 403
        staff.user_permissions.add(Permission.objects.get(codename="view_subscription"))
        viewer = Api(User.objects.get(pk=staff.pk))
        assert viewer.get("/api/webhooks").status_code == 200
        assert viewer.post("/api/webhooks", {"url": URL}).status_code == 403
        assert delete(viewer, f"/api/webhooks/{pk}").status_code == 403
        assert Subscription.objects.count() == 1

    def test_a_private_address_is_refused_unless_allowed(self, settings: Any) -> None:
        settings.WEBHOOKS_ALLOW_PRIVATE = False
        r = self.create()
        assert r.status_code == 400
        assert "loopback" in r.json()["fields"]["url"]
        pk = None
        settings.WEBHOOKS_ALLOW_PRIVATE = True
        pk = self.create().json()["id"]
        settings.WEBHOOKS_ALLOW_PRIVATE = False
        r = patch(self.admin, f"/api/webhooks/{pk}", {"url": "http://10.1.2.3/hook"})
        assert r.status_code == 400 and "private" in r.json()["fields"]["url"]
