"""/mcp/gateway: the gateway's own tools for any MCP client. `request_approval` asks a person
to approve an action the client will take itself; `ask_human` asks a person a question.

Each call raises a request as POST /api/requests raises an outside agent's (the same checks,
policy, deadline, inbox and trail: approvals.api.external.parse, agents.external), in the
caller's run of its agent, and is answered as a gated upstream call is: held until the request
is decided, up to MCP_HOLD_SECONDS, else an isError result saying it is pending, whose retry
with the same arguments (same caller) attaches to the same request.

The request's agent is the call's `agent` argument when it gives one, else the token's name
made a slug, else DEFAULT_AGENT: an agent definition of that name lends its policy.
"""

import dataclasses
import json
from typing import Any

import jsonschema
import mcp_types as types
from django.utils.text import slugify
from mcp.shared.exceptions import MCPError

from access import ratelimits
from access.revocation import Credential
from agents import external
from agents.models import Suspension
from agents.runtime.tools import Tool
from approvals.api.external import MAX_TIMEOUT, parse
from approvals.http import BadRequest
from infra.aio import blocking
from mcp_gateway import actions, holding, upstreams

# The endpoint /mcp/gateway: a name no upstream may take (upstreams.check).
NAME = upstreams.RESERVED
DEFAULT_AGENT = "mcp-client"
SAFETY_POLL = 1.0

_AGENT = {
    "type": "string",
    "description": "Who asks, as the inbox shows it (letters, digits, - and _); default: "
    "the token's name.",
}
_TIMEOUT = {
    "type": "integer",
    "minimum": 1,
    "maximum": MAX_TIMEOUT,
    "description": "Seconds a person has to decide; then the request is rejected.",
}
_SCHEMA = {"type": "object", "description": "A JSON Schema object."}

REQUEST_APPROVAL = types.Tool(
    name="request_approval",
    description="Ask a person to approve an action before you take it. Returns approved=true "
    "and the arguments to use (a reviewer may have edited them), or an error saying who "
    "rejected it and why. If the result says the request is pending, call again with the "
    "same arguments to keep waiting.",
    input_schema={
        "type": "object",
        "properties": {
            "action": {
                "type": "string",
                "description": "The action's name (letters, digits, - and _), e.g. send_email.",
            },
            "arguments": {"type": "object", "description": "The action's arguments."},
            "schema": {**_SCHEMA, "description": "JSON Schema of the arguments, for editing."},
            "prompt": {"type": "string", "description": "What the reviewer is asked."},
            "timeout": _TIMEOUT,
            "agent": _AGENT,
        },
        "required": ["action", "arguments"],
        "additionalProperties": False,
    },
    annotations=types.ToolAnnotations(readOnlyHint=False, openWorldHint=True),
)
ASK_HUMAN = types.Tool(
    name="ask_human",
    description="Ask a person a question and wait for the answer. If the result says the "
    "question is pending, call again with the same arguments to keep waiting.",
    input_schema={
        "type": "object",
        "properties": {
            "question": {"type": "string", "minLength": 1, "description": "The question."},
            "schema": {**_SCHEMA, "description": "JSON Schema of the answer, if it has a shape."},
            "timeout": _TIMEOUT,
            "agent": _AGENT,
        },
        "required": ["question"],
        "additionalProperties": False,
    },
    annotations=types.ToolAnnotations(readOnlyHint=True, openWorldHint=True),
)
TOOLS = [REQUEST_APPROVAL, ASK_HUMAN]


def _checked(name: str, arguments: dict[str, Any]) -> types.Tool:
    """The tool called, its arguments checked against its input schema (raises MCPError)."""
    described = {t.name: t for t in TOOLS}.get(name)
    if described is None:
        raise MCPError(types.INVALID_PARAMS, f"Unknown tool: {name} ({NAME}).")
    schema = described.input_schema
    wrong = next(jsonschema.validators.validator_for(schema)(schema).iter_errors(arguments), None)
    if wrong is not None:
        where = ".".join(str(p) for p in wrong.absolute_path) or "arguments"
        raise MCPError(
            types.INVALID_PARAMS, f"Invalid arguments for {name}: {where}: {wrong.message}"
        )
    return described


def request_for(user: Any, name: str, arguments: dict[str, Any], via: str) -> external.Request:
    """The request a call asks for, checked as POST /api/requests checks one (raises MCPError
    naming the fields); its run and key are set when it is raised (actions.ask)."""
    token = getattr(getattr(user, "api_token", None), "name", "")
    agent = arguments.get("agent") or slugify(token)[:100] or DEFAULT_AGENT
    body: dict[str, Any] = {"agent": agent, "run_id": "mcp", "idempotency_key": "mcp"}
    body.update({k: arguments[k] for k in ("timeout",) if k in arguments})
    if name == REQUEST_APPROVAL.name:
        body.update(tool=arguments["action"], arguments=arguments["arguments"])
        body.update({k: arguments[k] for k in ("schema", "prompt") if k in arguments})
        body.setdefault("prompt", f"{agent} asks to run {arguments['action']}.")
    else:
        # A question's schema describes its answer, not arguments: checked apart.
        body.update(kind="input", prompt=arguments["question"])
    try:
        request, _ = parse(body)
    except BadRequest as e:
        found = "; ".join(f"{k}: {v}" for k, v in (e.fields or {}).items()) or e.detail
        raise MCPError(types.INVALID_PARAMS, f"Invalid arguments for {name}: {found}") from e
    if name == ASK_HUMAN.name and "schema" in arguments:
        try:
            Tool(name="answer", description="", input_schema=arguments["schema"])
        except ValueError as e:
            raise MCPError(types.INVALID_PARAMS, f"Invalid arguments for {name}: {e}") from e
        request = dataclasses.replace(request, schema=arguments["schema"])
    return dataclasses.replace(request, description=f"Asked through /mcp/{NAME} by {via}.")


def _raise(user: Any, name: str, arguments: dict[str, Any], request: external.Request) -> Any:
    agent = external.agent_for(request.agent, user)
    key = actions.call_key(user, f"{NAME}/{name}", arguments)
    return actions.ask(
        agent, agent, user, key, lambda run, k: dataclasses.replace(request, run_id=run, key=k)
    )


async def call(
    user: Any,
    credential: Credential,
    via: str,
    name: str,
    arguments: dict[str, Any],
    progress: holding.Progress | None = None,
) -> types.CallToolResult:
    """A call of one of TOOLS: its request raised or attached to, then held for the answer."""
    _checked(name, arguments)
    request = await blocking(request_for)(user, name, arguments, via)
    try:
        s = await blocking(_raise)(user, name, arguments, request)
    except ratelimits.Limited as e:
        return holding.not_raised(e)

    async def answered(s: Suspension) -> types.CallToolResult:
        return answer(s)

    return await holding.hold(s, user, credential, answered, progress)


def answer(s: Suspension) -> types.CallToolResult:
    """A decided request as its tool's result: the approved arguments, or the answer; a
    rejection or a deadline is an error saying who decided and why."""
    payload = external.request_payload(s)
    about = {"request": str(s.pk), "decided_by": payload["decided_by"]}
    if not payload["approved"]:
        return holding.refused(s, lead="Request")
    if s.kind == Suspension.Kind.INPUT:
        text = payload["response"] or ""
        found: dict[str, Any] = {"answer": text, **about}
        if s.tool_schema and s.tool_schema != {"type": "object"}:
            try:
                found["content"] = json.loads(text)
            except ValueError:
                pass  # an answer in words: the text is all there is
        return _structured(found, text)
    found = {"approved": True, "arguments": payload["arguments"] or {}, **about}
    return _structured(found, json.dumps(found))


def _structured(content: dict[str, Any], text: str) -> types.CallToolResult:
    return types.CallToolResult(
        content=[types.TextContent(type="text", text=text)], structured_content=content
    )
