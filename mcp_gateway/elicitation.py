"""An upstream's `elicitation/create` during a call the gateway forwards: a person answers it.

The gateway is the upstream's client, so the upstream's question comes to it. It is raised
as an input request on the caller's thread of that upstream (as POST /api/requests raises
an outside agent's question), with the requested schema as the form the reviewer fills in;
the process that makes the upstream call holds the question until the request is decided,
then answers the upstream: an answer is `accept` with its content, a rejection `decline`,
anything else (cancelled, the deadline, the request refused for now) `cancel`. A URL-mode
question shows the URL and its host as text; the gateway never fetches it.

The audit trail is the request's own events (AGENT_SUSPENDED; SUSPENSION_DECIDED, or
SUSPENSION_CANCELLED when the call ends first; AGENT_RESUMED when the answer is read): nothing
else is recorded here.
"""

import asyncio
import json
import uuid
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from datetime import timedelta
from typing import Any
from urllib.parse import urlsplit

import jsonschema
import mcp_types as types
from django.db import IntegrityError, transaction
from django.utils import timezone
from mcp.client.session import ClientRequestContext, ElicitationFnT

from access import admission, ratelimits
from access.revocation import Credential
from agents import cancelling, external
from agents.models import AgentDefinition, Suspension
from approvals.waiters import waiting
from infra.aio import blocking, wait_event
from mcp_gateway import actions
from mcp_gateway.models import Upstream
from mcp_gateway.upstreams import override

POLL = 1.0
GRACE = timedelta(seconds=5)
# The suspension's presentation says how its answer is read (approvals.api.decisions checks
# a form answer against the schema when it is given).
ANSWER = "answer"
FORM = "form"
URL = "url"
# Bounds on what the upstream sends, before anything of it is stored or shown.
MAX_MESSAGE = 2000
MAX_URL = 2000
MAX_SCHEMA_BYTES = 16 * 1024
MAX_FIELDS = 50
# The primitive field types the specification allows in a requested schema.
PRIMITIVES = {"string", "number", "integer", "boolean"}


class Refused(Exception):
    """The upstream's question cannot be put to a person as sent."""


def callback(
    upstream: Upstream, user: Any, tool: str, credential: Credential | None = None
) -> ElicitationFnT:
    """The elicitation callback of one upstream call made for `user`: forward.call passes it to
    the SDK's client, which then declares the elicitation capability. With the caller's
    credential the wait is woken by the events hub; without (a worker) it polls."""

    async def elicit(
        context: ClientRequestContext, params: types.ElicitRequestParams
    ) -> types.ElicitResult | types.ErrorData:
        try:
            asked = _question(upstream, user, tool, params)
        except Refused as e:
            return types.ErrorData(code=types.INVALID_PARAMS, message=str(e))
        try:
            s = await blocking(raise_question)(upstream, user, tool, asked)
        except (ratelimits.Limited, external.RunEnded, IntegrityError):
            return types.ElicitResult(action="cancel")
        try:
            s = await _decided(s, credential)
        except asyncio.CancelledError:
            # The call ended first (its client went away, or the upstream stopped waiting):
            # nobody would read an answer, so the card leaves the inbox.
            await asyncio.shield(blocking(withdraw)(s, user))
            raise
        await blocking(external.acknowledge)(s, user)
        return answer(s)

    return elicit


def _question(
    upstream: Upstream, user: Any, tool: str, params: types.ElicitRequestParams
) -> dict[str, Any]:
    """The question as it is stored: prompt, the arguments the card shows, the schema."""
    message = _bounded(params.message, MAX_MESSAGE)
    said = f"{upstream.name} asks, while running {tool} for {user.username}: {message}"
    if isinstance(params, types.ElicitRequestURLParams):
        url = _bounded(params.url, MAX_URL)
        host = urlsplit(url).hostname or ""
        if not host:
            raise Refused("The elicitation's URL has no host.")
        return {
            "mode": URL,
            "prompt": said,
            "arguments": {"url": url, "host": host},
            "schema": {"type": "object"},
        }
    return {
        "mode": FORM,
        "prompt": said,
        "arguments": {},
        "schema": flat(params.requested_schema),
    }


def flat(schema: Any) -> dict[str, Any]:
    """The requested schema, checked to be what the specification allows: an object of
    primitive fields (strings, with their enums; numbers; booleans; lists of enum choices)."""
    if not isinstance(schema, dict) or schema.get("type") != "object":
        raise Refused("The requested schema must be an object.")
    if len(json.dumps(schema)) > MAX_SCHEMA_BYTES:
        raise Refused(f"The requested schema is over {MAX_SCHEMA_BYTES} bytes.")
    fields = schema.get("properties") or {}
    if not isinstance(fields, dict) or not 0 < len(fields) <= MAX_FIELDS:
        raise Refused(f"The requested schema must have 1 to {MAX_FIELDS} fields.")
    for name, field in fields.items():
        kind = field.get("type") if isinstance(field, dict) else None
        items = field.get("items") if isinstance(field, dict) else None
        choices = isinstance(items, dict) and ("enum" in items or "anyOf" in items)
        if kind not in PRIMITIVES and not (kind == "array" and choices):
            raise Refused(f"The field {name!r} is not a primitive the specification allows.")
    try:
        jsonschema.validators.validator_for(schema).check_schema(schema)
    except jsonschema.exceptions.SchemaError as e:
        raise Refused(f"The requested schema is not valid: {e.message}") from e
    return schema


def raise_question(upstream: Upstream, user: Any, tool: str, asked: dict[str, Any]) -> Suspension:
    """The input request for the question, on the caller's thread of this upstream (the run
    of actions.run_id, the upstream's policy and reminders, the tool's deadline)."""
    agent = external.agent_for(upstream.name, user)
    rules = AgentDefinition(
        name=upstream.name, policy=upstream.policy, reminders=upstream.reminders
    )
    timeout, on_timeout = override(upstream, tool)
    how = (
        "Open the URL yourself if you trust its host; answer to say it is done, or decline."
        if asked["mode"] == URL
        else "Answer with the form's fields (a JSON object that fits the schema), or decline."
    )
    request = external.Request(
        agent=upstream.name,
        run_id=actions.run_id(agent, user),
        tool=tool,
        arguments=asked["arguments"],
        schema=asked["schema"],
        prompt=asked["prompt"],
        kind=Suspension.Kind.INPUT,
        timeout=timeout,
        on_timeout=on_timeout,
        # Each question is its own request: nothing asks it again.
        key=f"elicit:{uuid.uuid4().hex}",
        description=f"The upstream {upstream.name} asks its client for input. {how}",
    )
    with transaction.atomic(), admission.admitted(agent):
        s = external.raise_request(agent, rules, request, user)
        s.presentation = {**s.presentation, ANSWER: asked["mode"]}
        Suspension.objects.filter(pk=s.pk).update(presentation=s.presentation)
    return s


def withdraw(s: Suspension, user: Any) -> bool:
    """Cancel the question if it is still open, as a cancelled run cancels its requests
    (agents.cancelling): True when this call did."""
    return cancelling.cancel_request(
        s, user, "the upstream call ended before an answer", decided_by=False
    )


async def _decided(s: Suspension, credential: Credential | None) -> Suspension:
    """The request once decided, or once past its deadline as it stands now (a reviewer may
    have extended it), plus GRACE for the sweeper that records it: either way the question
    is no longer open."""
    async with _woken(s, credential) as woken:
        while True:
            woken.clear()
            s = await blocking(actions.reread)(s.pk)
            if not s.pending:
                return s
            if s.expires_at is not None and timezone.now() > s.expires_at + GRACE:
                return s
            await wait_event(woken, POLL)


@asynccontextmanager
async def _woken(s: Suspension, credential: Credential | None) -> AsyncIterator[asyncio.Event]:
    """An event set when the request may have changed: the hub's, subscribed before the first
    read, when there is a caller's credential; else one that is never set (the wait polls)."""
    if credential is None:
        yield asyncio.Event()
        return
    async with waiting("suspension", str(s.pk), credential) as waiter:
        yield waiter.woken


def answer(s: Suspension) -> types.ElicitResult:
    """What goes back to the upstream for a decided (or overdue) request."""
    if s.pending or s.status == Suspension.Status.CANCELLED:
        return types.ElicitResult(action="cancel")
    if s.status == Suspension.Status.REJECTED:
        return types.ElicitResult(action="decline")
    if not s.approved or s.response is None:
        return types.ElicitResult(action="cancel")  # the deadline passed with no answer
    if (s.presentation or {}).get(ANSWER) == URL:
        return types.ElicitResult(action="accept")
    try:
        content = json.loads(s.response)
        jsonschema.validate(content, s.tool_schema)
    except (ValueError, jsonschema.ValidationError):
        # approvals.api.decisions checks the answer when it is given; one that got past it
        # (a decision recorded another way) is not sent as content the schema refuses.
        return types.ElicitResult(action="cancel")
    return types.ElicitResult(action="accept", content=content)


def _bounded(text: str, limit: int) -> str:
    text = "".join(c for c in str(text) if c.isprintable() or c in "\n\t")
    return text if len(text) <= limit else text[: limit - 1] + "…"
