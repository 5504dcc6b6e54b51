"""The Account page's devices: a reviewer's browser subscription kept (CSRF-checked, only a
reviewer's, only at a known push service), listed, removed; each change audited."""

import hashlib
import json
from typing import Any

import pytest
from django.test import Client

from agents.models import Event
from tests.webpush.standin import PushService
from webpush import devices, keys
from webpush.models import Device

ADD = "/account/devices"


def logged_in(user: Any, csrf: bool = False) -> Client:
    client = Client(enforce_csrf_checks=csrf)
    client.force_login(user)
    return client


def add(client: Client, body: Any, **headers: str) -> Any:
    return client.post(ADD, json.dumps(body), content_type="application/json", headers=headers)


class AddDeviceTestCase:
    @pytest.fixture(autouse=True)
    def setup(self, users: dict[str, Any], push: PushService) -> None:
        self.users = users
        self.alice = users["reviewer"]
        self.phone = push.subscribe("phone")

    def test_a_reviewer_adds_this_browser_and_it_is_audited(self) -> None:
        answer = add(
            logged_in(self.alice),
            {"subscription": self.phone.info(), "name": "  Alice's\nphone "},
        )

        assert answer.status_code == 201, answer.content
        device = Device.objects.get(user=self.alice)
        assert answer.json() == {"id": device.pk, "name": "Alice's phone"}
        assert device.endpoint == self.phone.endpoint
        added = Event.objects.get(type=devices.Notice.ADDED)
        assert added.actor == self.alice
        assert added.payload == {
            "user": "alice",
            "device": device.pk,
            "name": "Alice's phone",
            "push_service": "127.0.0.1",
            "via": "page",
        }
        assert self.phone.endpoint not in json.dumps(added.payload)  # a capability URL

    def test_an_unnamed_device_is_named_after_its_browser(self) -> None:
        ua = "Mozilla/5.0 (Linux; Android 14; Pixel 8) AppleWebKit/537.36 Chrome/131.0 Mobile"
        add(logged_in(self.alice), {"subscription": self.phone.info()}, user_agent=ua)
        assert Device.objects.get().name == "Chrome on Android"

    def test_the_same_subscription_again_is_one_device(self) -> None:
        client = logged_in(self.alice)
        add(client, {"subscription": self.phone.info(), "name": "Phone"})
        add(client, {"subscription": self.phone.info(), "name": "My phone"})
        assert list(Device.objects.values_list("name", flat=True)) == ["My phone"]
        assert Event.objects.filter(type=devices.Notice.ADDED).count() == 1

    def test_another_reviewer_on_the_same_browser_takes_it_over(self) -> None:
        add(logged_in(self.alice), {"subscription": self.phone.info(), "name": "Shared"})
        add(logged_in(self.users["teammate"]), {"subscription": self.phone.info(), "name": "S"})
        assert Device.objects.get().user == self.users["teammate"]
        removed = Event.objects.get(type=devices.Notice.REMOVED)
        assert removed.payload["user"] == "alice"
        assert removed.actor == self.users["teammate"]

    def test_without_the_csrf_token_nothing_is_kept(self) -> None:
        answer = add(logged_in(self.alice, csrf=True), {"subscription": self.phone.info()})
        assert answer.status_code == 403
        assert not Device.objects.exists()

    def test_only_a_reviewer_may_add_one(self) -> None:
        body = {"subscription": self.phone.info()}
        assert add(Client(), body).status_code == 401
        assert add(logged_in(self.users["outsider"]), body).status_code == 403
        assert logged_in(self.alice).get(ADD).status_code == 405
        assert not Device.objects.exists()

    @pytest.mark.parametrize(
        "endpoint",
        [
            "https://attacker.example/push/1",
            "http://10.0.0.5/internal",
            "https://fcm.googleapis.com.attacker.example/x",
            "ftp://127.0.0.1/push/1",
            "https://user:pw@127.0.0.1/push/1",
            "x" * 2000,
        ],
    )
    def test_an_endpoint_outside_the_known_push_services_is_refused(self, endpoint: str) -> None:
        body = {"subscription": {**self.phone.info(), "endpoint": endpoint}}
        answer = add(logged_in(self.alice), body)
        assert answer.status_code == 400
        assert answer.json()["error"] == "subscription_refused"
        assert not Device.objects.exists()

    def test_a_known_push_service_needs_https(self, settings: Any) -> None:
        settings.WEBPUSH_PUSH_SERVICES = ["fcm.googleapis.com"]
        assert devices.check_endpoint("https://fcm.googleapis.com/fcm/send/abc")
        with pytest.raises(devices.Refused):
            devices.check_endpoint("http://fcm.googleapis.com/fcm/send/abc")

    def test_keys_that_are_not_a_subscriptions_are_refused(self) -> None:
        info = self.phone.info()
        for keys_sent in ({"p256dh": "AAAA", "auth": info["keys"]["auth"]}, {}, "x"):
            answer = add(logged_in(self.alice), {"subscription": {**info, "keys": keys_sent}})
            assert answer.status_code == 400
        assert not Device.objects.exists()


class AccountPageDevicesTestCase:
    @pytest.fixture(autouse=True)
    def setup(self, users: dict[str, Any], push: PushService) -> None:
        self.users = users
        self.alice = users["reviewer"]
        self.phone = push.subscribe("phone")
        self.device = devices.add(self.alice, self.phone.info(), "Phone")

    def test_the_page_lists_the_devices_and_offers_to_turn_this_one_on(self) -> None:
        page = logged_in(self.alice).get("/account/").content.decode()
        assert "Turn on notifications on this device" in page
        assert f'data-key="{keys.public_key()}"' in page
        digest = hashlib.sha256(self.phone.endpoint.encode()).hexdigest()
        assert f'data-endpoint-digest="{digest}"' in page
        assert self.phone.endpoint not in page
        assert "js/devices.js" in page

    def test_a_reviewer_removes_their_device_and_it_is_audited(self) -> None:
        answer = logged_in(self.alice).post(f"/account/devices/{self.device.pk}/remove")
        assert answer.status_code == 302
        assert answer["Location"] == "/account/?devices=removed"
        assert not Device.objects.exists()
        removed = Event.objects.get(type=devices.Notice.REMOVED)
        assert (removed.actor, removed.payload["via"]) == (self.alice, "page")

    def test_nobody_else_removes_it(self) -> None:
        logged_in(self.users["teammate"]).post(f"/account/devices/{self.device.pk}/remove")
        assert Client().post(f"/account/devices/{self.device.pk}/remove").status_code == 302
        assert (
            logged_in(self.alice).get(f"/account/devices/{self.device.pk}/remove").status_code
            == 405
        )
        assert Device.objects.filter(pk=self.device.pk).exists()
        assert not Event.objects.filter(type=devices.Notice.REMOVED).exists()


class InstallableAppTestCase:
    def test_the_service_worker_is_served_at_the_root_for_the_whole_site(self, db: Any) -> None:
        answer = Client().get("/sw.js")
        assert answer.status_code == 200
        assert answer["Content-Type"] == "text/javascript; charset=utf-8"
        assert answer["Service-Worker-Allowed"] == "/"
        assert answer["Cache-Control"] == "no-cache"
        assert b'addEventListener("push"' in answer.content
        assert b'addEventListener("notificationclick"' in answer.content
        assert b'addEventListener("fetch"' not in answer.content  # it caches and answers nothing

    def test_the_manifest_makes_the_pages_installable(self, users: dict[str, Any]) -> None:
        answer = Client().get("/manifest.webmanifest")
        assert answer["Content-Type"] == "application/manifest+json"
        manifest = answer.json()
        assert manifest["display"] == "standalone"
        assert manifest["start_url"] == "/"
        assert {i["sizes"] for i in manifest["icons"]} == {"192x192", "512x512"}
        for icon in manifest["icons"]:
            png = Client().get(icon["src"])
            assert png.status_code == 200
            assert b"".join(png.streaming_content)[:8] == b"\x89PNG\r\n\x1a\n"
        page = logged_in(users["reviewer"]).get("/").content.decode()
        assert '<link rel="manifest" href="/manifest.webmanifest">' in page
