"""The events socket opens with a session only for pages of the site: scheme, host and port."""

from typing import Any

import pytest
from channels.testing import WebsocketCommunicator
from django.core.exceptions import ImproperlyConfigured

from access.models import ApiToken
from gateway import settings as gateway_settings
from tests.approvals.test_consumer import application, run, session_cookie

SITE = "https://gateway.example.com:8443"


def opens(origin: str | None, cookie: str = "", token: str = "") -> bool:
    headers = [(b"host", b"gateway.example.com:8443")]
    if origin is not None:
        headers.append((b"origin", origin.encode()))
    if cookie:
        headers.append((b"cookie", f"sessionid={cookie}".encode()))
    if token:
        headers.append((b"authorization", f"Bearer {token}".encode()))
    ws = WebsocketCommunicator(application, "/ws/events/?after=0", headers=headers)

    async def check() -> bool:
        connected, _ = await ws.connect()
        if connected:
            await ws.disconnect()
        return connected

    return run(check)


class SocketOriginTestCase:
    @pytest.fixture(autouse=True)
    def setup(self, users: dict[str, Any], settings: Any, transactional_db: Any) -> None:
        settings.WEBSOCKET_ALLOWED_ORIGINS = [SITE, "http://localhost:8000"]
        self.cookie = session_cookie(users["reviewer"])
        self.users = users

    def test_it_accepts_the_exact_origin_of_the_site(self) -> None:
        assert opens(SITE, self.cookie)
        assert opens("HTTPS://Gateway.Example.com:8443", self.cookie)  # origins ignore case
        assert opens("http://localhost:8000", self.cookie)

    def test_it_refuses_the_same_host_on_another_port(self) -> None:
        assert not opens("https://gateway.example.com:9443", self.cookie)
        assert not opens("https://gateway.example.com", self.cookie)
        assert not opens("http://localhost:5173", self.cookie)

    def test_it_refuses_the_same_host_and_port_under_another_scheme(self) -> None:
        assert not opens("http://gateway.example.com:8443", self.cookie)

    def test_it_refuses_a_subdomain_and_a_missing_origin(self) -> None:
        assert not opens("https://evil.gateway.example.com:8443", self.cookie)
        assert not opens(None, self.cookie)

    def test_a_token_client_needs_no_origin(self) -> None:
        _, token = ApiToken.issue(self.users["reviewer"], "client")
        assert opens(None, token=token)
        assert opens("http://localhost:5173", token=token)


class AllowedOriginsSettingTestCase:
    def test_it_defaults_to_the_site_url_and_the_csrf_trusted_origins(
        self, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        monkeypatch.delenv("WEBSOCKET_ALLOWED_ORIGINS", raising=False)
        monkeypatch.setattr(gateway_settings, "SITE_URL", "https://gw.example.com/")
        monkeypatch.setattr(
            gateway_settings,
            "CSRF_TRUSTED_ORIGINS",
            ["https://admin.example.com", "https://*.example.com"],
        )
        found = gateway_settings._origins(
            "WEBSOCKET_ALLOWED_ORIGINS", gateway_settings._site_origins()
        )
        assert found == ["https://gw.example.com", "https://admin.example.com"]

    def test_a_loopback_site_url_counts_under_each_loopback_name(
        self, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        monkeypatch.setattr(gateway_settings, "SITE_URL", "http://localhost:8000")
        monkeypatch.setattr(gateway_settings, "CSRF_TRUSTED_ORIGINS", [])
        assert gateway_settings._site_origins() == [
            "http://localhost:8000",
            "http://127.0.0.1:8000",
            "http://[::1]:8000",
        ]

    def test_it_reads_the_variable_and_refuses_what_is_not_an_exact_origin(
        self, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        monkeypatch.setenv("WEBSOCKET_ALLOWED_ORIGINS", "https://a.example.com, http://b:81")
        assert gateway_settings._origins("WEBSOCKET_ALLOWED_ORIGINS", []) == [
            "https://a.example.com",
            "http://b:81",
        ]
        for bad in ("a.example.com", "https://*.example.com", "https://.example.com", "*"):
            monkeypatch.setenv("WEBSOCKET_ALLOWED_ORIGINS", bad)
            with pytest.raises(ImproperlyConfigured):
                gateway_settings._origins("WEBSOCKET_ALLOWED_ORIGINS", [])
