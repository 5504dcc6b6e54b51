"""The agent card: public, each loaded agent a skill, the endpoint, streaming, our tokens."""

from typing import Any

import httpx
import pytest
from a2a.client import A2ACardResolver
from django.test import Client

from agents.models import AgentDefinition
from tests.a2a.conftest import Gateway, run


class AgentCardTestCase:
    @pytest.mark.worker
    def test_the_sdk_resolves_the_card_with_each_agent_a_skill(self, gateway: Gateway) -> None:
        async def resolve() -> Any:
            async with httpx.AsyncClient() as http:  # no token: the card is public
                return await A2ACardResolver(http, gateway.url).get_agent_card()

        card = run(resolve())
        skills = {s.id: s for s in card.skills}
        assert set(skills) == set(AgentDefinition.objects.values_list("name", flat=True))
        assert [s.id for s in card.skills] == sorted(skills)  # the first is the default
        helpdesk = skills["helpdesk"]
        assert helpdesk.name == "helpdesk"
        assert helpdesk.description == "Asks the user before restarting a service."
        assert list(skills["clerk"].input_modes) == ["text/plain"]
        assert list(skills["formclerk"].input_modes) == ["application/json"]
        interfaces = {
            (i.protocol_binding, i.protocol_version): i.url for i in card.supported_interfaces
        }
        assert interfaces == {
            ("JSONRPC", "1.0"): f"{gateway.url}/a2a",
            ("JSONRPC", "0.3"): f"{gateway.url}/a2a",
        }
        assert card.capabilities.streaming is True
        assert card.capabilities.push_notifications is True
        assert card.security_schemes["bearer"].http_auth_security_scheme.scheme == "Bearer"
        scheme = card.security_schemes["bearer"].http_auth_security_scheme
        assert all(scope in scheme.description for scope in ("runs", "read", "decide"))
        assert list(card.security_requirements[0].schemes) == ["bearer"]
        assert list(card.default_input_modes) == ["text/plain", "application/json"]

    @pytest.mark.django_db
    def test_the_card_is_answered_from_site_url_and_cached_by_its_etag(self, settings: Any) -> None:
        settings.SITE_URL = "https://gateway.example.com"
        settings.ALLOWED_HOSTS = ["gateway.example.com", "127.0.0.1"]
        AgentDefinition.objects.create(name="solo", description="The only one.")
        client = Client()
        r = client.get("/.well-known/agent-card.json", HTTP_HOST="gateway.example.com")
        assert r.status_code == 200
        card = r.json()
        assert card["supportedInterfaces"][0]["url"] == "https://gateway.example.com/a2a"
        assert card["url"] == "https://gateway.example.com/a2a"  # the 0.3 field, for 0.3 clients
        assert [s["id"] for s in card["skills"]] == ["solo"]
        assert "max-age" in r["Cache-Control"]
        again = client.get(
            "/.well-known/agent-card.json",
            HTTP_HOST="gateway.example.com",
            HTTP_IF_NONE_MATCH=r["ETag"],
        )
        assert again.status_code == 304
        other = client.get("/.well-known/agent-card.json", HTTP_HOST="127.0.0.1")
        assert other.json()["url"] == "http://127.0.0.1/a2a"  # not SITE_URL: where it came
        refused = client.post("/.well-known/agent-card.json", HTTP_HOST="127.0.0.1")
        assert refused.status_code == 405
