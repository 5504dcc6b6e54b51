"""The agent card at /.well-known/agent-card.json: the gateway as one A2A agent whose skills
are its loaded agents. Public, as the specification has it: it says what the gateway offers and
how to authenticate, nothing about any task."""

import hashlib
import json
from importlib.metadata import PackageNotFoundError, version
from urllib.parse import urlsplit

from a2a.server.request_handlers.response_helpers import agent_card_to_dict
from a2a.types import (
    AgentCapabilities,
    AgentCard,
    AgentInterface,
    AgentSkill,
    HTTPAuthSecurityScheme,
    SecurityRequirement,
    SecurityScheme,
    StringList,
)
from django.conf import settings
from django.http import HttpRequest, HttpResponse
from django.views.decorators.http import require_GET

from a2a_server.mapping import JSON, TEXT
from agents.models import AgentDefinition
from agents.replies import input_rules

ENDPOINT = "/a2a"
BEARER = "bearer"
MAX_AGE = 60  # seconds a client may keep the card (the skills change when agents are loaded)


def base_url(request: HttpRequest) -> str:
    """SITE_URL when the request came to it (so a proxy's https is kept), else the address the
    request came to (its Host is one of ALLOWED_HOSTS: Django checked it)."""
    site = urlsplit(settings.SITE_URL)
    if site.netloc == request.get_host():
        return f"{site.scheme}://{site.netloc}"
    return f"{request.scheme}://{request.get_host()}"


def build_card(base: str) -> AgentCard:
    try:
        release = version("approval-gateway")
    except PackageNotFoundError:
        release = "0"
    card = AgentCard(
        name="Approval gateway",
        description=(
            "Runs agents that stop for a person: an approval, an answer, a reply. Each skill is "
            "one agent; name it in the message's metadata as `agent` (the first skill is the "
            "default). A task waits in input-required while a person is needed: answer a "
            'question with a text part, decide an approval with a data part {"decision": '
            '{"suspension", "approved", "reason", "modifiedArgs"}}, answer the agent instead '
            'with {"decision": {"suspension", "response"}} where the tool allows it, or dismiss '
            'a request from the inbox with {"decision": {"suspension", "ignore": true}}.'
        ),
        version=release,
        capabilities=AgentCapabilities(
            streaming=True, push_notifications=True, extended_agent_card=False
        ),
        default_input_modes=[TEXT, JSON],
        default_output_modes=[TEXT, JSON],
    )
    url = base + ENDPOINT
    card.supported_interfaces.extend(
        [
            AgentInterface(url=url, protocol_binding="JSONRPC", protocol_version="1.0"),
            AgentInterface(url=url, protocol_binding="JSONRPC", protocol_version="0.3"),
        ]
    )
    card.security_schemes[BEARER].CopyFrom(
        SecurityScheme(
            http_auth_security_scheme=HTTPAuthSecurityScheme(
                scheme="Bearer",
                description=(
                    "An API token: python manage.py create_api_token USERNAME --scope S. Its "
                    "scopes: runs (start tasks, see its own), read (see every task), decide "
                    "(decide and answer; reply to and cancel any task)."
                ),
            )
        )
    )
    requirement = SecurityRequirement()
    requirement.schemes[BEARER].CopyFrom(StringList())
    card.security_requirements.append(requirement)
    for agent in AgentDefinition.objects.order_by("name"):
        card.skills.append(
            AgentSkill(
                id=agent.name,
                name=agent.name,
                description=agent.description or agent.name,
                tags=["agent", agent.model],
                input_modes=list(input_rules(agent).types),
                output_modes=[TEXT, JSON],
            )
        )
    return card


@require_GET
def agent_card(request: HttpRequest) -> HttpResponse:
    body = json.dumps(agent_card_to_dict(build_card(base_url(request))))
    etag = '"' + hashlib.sha256(body.encode()).hexdigest()[:32] + '"'
    if etag in request.headers.get("If-None-Match", ""):
        response = HttpResponse(status=304)
    else:
        response = HttpResponse(body, content_type="application/json")
    response["ETag"] = etag
    response["Cache-Control"] = f"max-age={MAX_AGE}"
    return response
