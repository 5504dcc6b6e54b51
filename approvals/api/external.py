"""POST /api/requests and GET /api/requests/{id}: approvals and questions from agents that run
outside the gateway (agents.external).

A token with the `runs` scope raises requests and reads its own; `read` or `decide` read any.
Deciding is resumeExecution's, as for every suspension: an asker never decides its own request
(four eyes, and a runs-only token lacks `decide`). Waiting: `?wait=N` (at most MAX_WAIT
seconds) answers once the request is decided or N seconds have passed; under daphne that wait
runs in the event loop (approvals.external_wait), holding no worker thread.
"""

import re
from typing import Annotated, Any, Literal

import jsonschema
import referencing.exceptions
from django.conf import settings
from django.db import IntegrityError
from django.http import HttpRequest, JsonResponse
from pydantic import Field, ValidationInfo, field_validator

from access import admission, ratelimits, scopes
from access.auth import api
from access.models import Scope
from agents import external, presentation
from agents.models import AgentDefinition, Suspension
from agents.runtime.tools import CONFIRMATION, INPUT, ON_TIMEOUT, Tool
from approvals import contract
from approvals.contract import Wrong, body, says, sent, within
from approvals.http import BadRequest, error, json_body, parse_uuid, whole_number
from approvals.openapi import Body, Query, operation
from approvals.schemas import Suspension as SuspensionModel

# The longest a GET may wait for a decision, in seconds: below common proxy read timeouts.
MAX_WAIT = 60
# An agent's name, as agent files name them (AgentDefinition.name is a slug); a tool's too.
AGENT_NAME = re.compile(r"^[-a-zA-Z0-9_]{1,100}$")
# The most seconds a request may wait for a person: a week.
MAX_TIMEOUT = 7 * 24 * 3600
# An idempotency key and a run id: printable ASCII, as HTTP headers and URLs carry them.
KEY = re.compile(r"^[\x21-\x7e]{1,100}$")
RUN_ID = re.compile(r"^[\x21-\x7e]{1,200}$")
SHAPES = {"agent": AGENT_NAME, "run_id": RUN_ID, "idempotency_key": KEY}
READ_SCOPES = (Scope.READ, Scope.DECIDE, Scope.RUNS)
SEE_OTHERS = "This token may read only the requests its user raised: another's needs read."


def _unprefixed(e: ValueError) -> str:
    """A check's message without the name it starts with ("request: summary must be ...")."""
    return str(e).partition(": ")[2] or str(e)


class RaiseRequest(Body):
    refused = "The request cannot be raised."
    says = {
        "agent": "The asking agent's name: letters, digits, - and _.",
        "run_id": "The outside run's id: 1-200 printable characters.",
        "idempotency_key": "1-100 printable characters, the same on a retry.",
        "tool": "The tool's name: letters, digits, - and _, at most 100.",
        "arguments": "A JSON object: the tool's arguments.",
        "schema": "A JSON Schema object for the arguments a reviewer may edit.",
        "prompt": "Text: what the reviewer is asked.",
        "kind": f"One of {CONFIRMATION} (approve or reject) or {INPUT} (a question).",
        "timeout": f"Seconds to wait for a person: a whole number from 1 to {MAX_TIMEOUT}.",
        "on_timeout": f"What happens at the deadline: one of {', '.join(ON_TIMEOUT)}.",
        "policy": "The name of an agent definition whose policy applies.",
        "description": "Text: what the tool does, for the reviewer.",
        "summary": "summary must be text, like 'Transfer {amount} to {to}'",
        "reject_reasons": f"reject_reasons must be a list of at most {presentation.MAX_REASONS} "
        "texts",
        "risk": "One of low, normal or high.",
    }

    agent: str = Field(description="The asking agent's name (letters, digits, - and _).")
    run_id: str = Field(description="The outside run's id: its requests share one thread.")
    idempotency_key: str = Field(
        description="The same key again (a retry) answers the request it made, 200."
    )
    tool: str | None = Field(
        None,
        validate_default=True,
        description="The tool to approve; ask_human for a question.",
    )
    arguments: dict[str, Any] = Field(default_factory=dict, description="The tool's arguments.")
    schema_: dict[str, Any] | None = Field(
        None,
        alias="schema",
        validate_default=True,
        description="JSON Schema of the arguments a reviewer may edit.",
    )
    prompt: str = Field("", validate_default=True, description="What the reviewer is asked.")
    kind: Literal["confirmation", "input"] = "confirmation"
    timeout: Annotated[int, Field(ge=1, le=MAX_TIMEOUT)] | None = Field(
        None, validate_default=True, description="Seconds until the default action applies."
    )
    on_timeout: Literal["reject", "approve"] = Field("reject", description="The default action.")
    policy: str | None = Field(
        None, description="An agent definition whose policy applies (default: the asker's)."
    )
    description: str = Field("", description="What the tool does, shown on the card.")
    summary: str | None = Field(
        None, description="The card's one line, a template over the arguments: 'Pay {amount}'."
    )
    reject_reasons: list[str] | None = Field(None, description="Reasons offered for a rejection.")
    risk: Literal["low", "normal", "high"] = Field(
        "normal", description="What is at stake: the inbox filters by it."
    )

    @field_validator("agent", "run_id", "idempotency_key")
    @classmethod
    def _shaped(cls, value: str, info: ValidationInfo) -> str:
        name = info.field_name or ""
        if not SHAPES[name].match(value):
            raise Wrong(says(cls, name))
        return value

    @field_validator("tool")
    @classmethod
    def _tool(cls, tool: str | None, info: ValidationInfo) -> str:
        if tool is None and not sent(info, "tool") and body(info).get("kind") == INPUT:
            tool = "ask_human"  # a question's tool, unless it names another
        if tool is None or not AGENT_NAME.match(tool):
            raise Wrong(says(cls, "tool"))
        return tool

    @field_validator("schema_")
    @classmethod
    def _schema(cls, schema: dict[str, Any] | None, info: ValidationInfo) -> dict[str, Any]:
        """A JSON Schema; the arguments (checked before it) must fit it."""
        if schema is None:
            if sent(info, "schema"):
                raise Wrong(says(cls, "schema"))
            schema = {"type": "object"}
        try:
            checked = Tool(name="request", description="", input_schema=schema)
        except ValueError as e:
            raise Wrong(_unprefixed(e)) from e
        arguments = info.data.get("arguments")
        if arguments is None:
            return schema  # refused themselves
        try:
            wrong = checked.validate(arguments)
        except (
            jsonschema.exceptions.SchemaError,
            referencing.exceptions.Unresolvable,
            re.error,
        ) as e:
            # A schema that passes the metaschema but cannot be applied (a $ref to nowhere,
            # a pattern that is not a regular expression): the caller's to fix.
            raise Wrong(f"The schema cannot check arguments: {e}") from e
        if wrong:
            found = "; ".join(f"{k or '(top)'}: {v}" for k, v in wrong.items())
            raise Wrong(found, field="arguments")
        return schema

    @field_validator("prompt")
    @classmethod
    def _prompt(cls, prompt: str, info: ValidationInfo) -> str:
        within(prompt, settings.MAX_MESSAGE_CHARS)
        if body(info).get("kind") == INPUT and not prompt.strip():
            raise Wrong("A question needs the question itself.")
        return prompt

    @field_validator("timeout")
    @classmethod
    def _timeout(cls, timeout: int | None, info: ValidationInfo) -> int:
        if timeout is None and not sent(info, "timeout"):
            timeout = settings.DEFAULT_BLOCKING_TIMEOUT
        if timeout is None or not 1 <= timeout <= MAX_TIMEOUT:
            raise Wrong(says(cls, "timeout"))
        return timeout

    @field_validator("policy")
    @classmethod
    def _policy(cls, name: str | None) -> str | None:
        if name is not None and not AGENT_NAME.match(name):
            raise Wrong(says(cls, "policy"))
        return name

    @field_validator("description")
    @classmethod
    def _description(cls, description: str) -> str:
        return within(description, settings.MAX_MESSAGE_CHARS)

    @field_validator("summary", mode="before")
    @classmethod
    def _summary(cls, summary: Any, info: ValidationInfo) -> Any:
        schema = body(info).get("schema")
        try:
            presentation.check_summary(
                summary, schema if isinstance(schema, dict) else {}, "request"
            )
        except ValueError as e:
            raise Wrong(_unprefixed(e)) from e
        return summary

    @field_validator("reject_reasons", mode="before")
    @classmethod
    def _reasons(cls, reasons: Any) -> list[str]:
        try:
            return list(presentation.check_reject_reasons(reasons, "request"))
        except ValueError as e:
            raise Wrong(_unprefixed(e)) from e


class ExternalRequest(SuspensionModel):
    run_id: str
    idempotency_key: str
    approved: bool | None = Field(description="null while pending.")
    arguments: dict[str, Any] | None = Field(
        description="Run the tool with these once approved (a reviewer's edit, or as sent)."
    )
    response: str | None = Field(description="A question's answer.")
    reason: str | None
    decided_by: str | None
    receipt: str | None = Field(
        description="The decision's signed receipt (a compact JWS): check it with "
        "/.well-known/jwks.json before acting on the decision (docs/receipts.md)."
    )
    url: str = Field(description="The run's page in the gateway.")


class WaitQuery(Query):
    wait: int | None = Field(
        None, description=f"Seconds to wait for a decision (at most {MAX_WAIT}; bearer token)."
    )


def parse(data: dict[str, Any]) -> tuple[external.Request, str | None]:
    """The request (approvals.api.bodies.RaiseRequest) and the name of the agent definition
    whose policy applies (None: the asking agent's own); raises BadRequest naming every field
    that is wrong."""
    body = contract.parse(RaiseRequest, data)
    request = external.Request(
        agent=body.agent,
        run_id=body.run_id,
        tool=body.tool,
        arguments=body.arguments,
        schema=body.schema_,
        prompt=body.prompt,
        kind=body.kind,
        timeout=body.timeout,
        on_timeout=body.on_timeout,
        key=body.idempotency_key,
        description=body.description,
        summary=body.summary,
        reject_reasons=tuple(body.reject_reasons or ()),
        risk=body.risk,
    )
    return request, body.policy


def _answer(s: Suspension, status: int) -> JsonResponse:
    return JsonResponse(external.request_payload(s), status=status)


def _again(s: Suspension, request: external.Request) -> JsonResponse:
    """The same key sent again: the request it made, or 409 when it stood for another."""
    if not external.same_request(s, request):
        return error(
            409,
            "idempotency_key_reused",
            "This idempotency key was used for another request in this run (another tool or "
            "other arguments); use a new key for a new request.",
            request=str(s.pk),
        )
    return _answer(s, 200)


@operation(
    "POST",
    "Raise a request from an outside agent",
    body=RaiseRequest,
    responses={200: ExternalRequest, 201: ExternalRequest},
    errors=(409,),
    description="An approval (or, kind input, a question) for reviewers, as any suspension: "
    "201 made, 200 when the idempotency key already made it; 409 `idempotency_key_reused` "
    "or `run_ended` (the run was cancelled in the gateway).",
)
@api(["POST"], perm="agents.add_thread", scope=Scope.RUNS, limit=ratelimits.RUNS)
def requests(request: HttpRequest) -> JsonResponse:
    """Raise a request: 201 with it, or 200 with the one this idempotency key already made."""
    try:
        ask, rules_name = parse(json_body(request))
    except BadRequest as e:
        return error(e.status, e.code, e.detail, e.fields)
    rules = None
    if rules_name is not None:
        rules = AgentDefinition.objects.filter(name=rules_name).first()
        if rules is None:
            return error(
                400,
                "invalid",
                "The request cannot be raised.",
                {"policy": f"No agent definition named {rules_name!r}."},
            )
    agent = external.agent_for(ask.agent, request.user)
    # Two tries: a call that lost a race for the same key reads the winner's request; one
    # that lost the race to make the run's thread finds it made the second time.
    for _ in range(2):
        found = external.find(request.user, agent, ask.run_id, ask.key)
        if found is not None:
            return _again(found, ask)
        try:
            with admission.admitted(agent):
                made = external.raise_request(agent, rules or agent, ask, request.user)
        except ratelimits.Limited as e:
            return ratelimits.too_many(e)
        except external.RunEnded as e:
            return error(
                409,
                "run_ended",
                f"This run was {e.thread.status} in the gateway; it takes no more requests.",
                status=e.thread.status,
                thread=str(e.thread.pk),
            )
        except IntegrityError:
            continue
        return _answer(made, 201)
    found = external.find(request.user, agent, ask.run_id, ask.key)
    if found is None:
        return error(409, "conflict", "Another request changed this run meanwhile; try again.")
    return _again(found, ask)


def wait_seconds(value: str | None) -> int | None:
    """`?wait=` as seconds (at most MAX_WAIT), 0 when absent; None when it is not a number."""
    if value is None or value == "":
        return 0
    seconds = whole_number(value)
    return None if seconds is None else min(seconds, MAX_WAIT)


def read(
    user: Any, request_id: str, acknowledge: bool = True
) -> tuple[int, dict[str, Any], Suspension | None]:
    """A request as `user` may read it: (HTTP status, body, the suspension when readable).
    Shared by the view below and the waiting reader (approvals.external_wait), which
    acknowledges a decision only once it may answer with it (`acknowledge=False`)."""
    pk = parse_uuid(request_id)
    s = (
        Suspension.objects.select_related("thread")
        .filter(pk=pk)
        .exclude(thread__external_run_id="")
        .first()
        if pk is not None
        else None
    )
    if s is None:
        return 404, {"error": "not_found", "detail": "No such request."}, None
    sees_all = scopes.has(user, Scope.READ) or scopes.has(user, Scope.DECIDE)
    if not sees_all and not scopes.owns(user, s.thread):
        needed = scopes.names(Scope.READ)
        return 403, {"error": "insufficient_scope", "detail": SEE_OTHERS, "scope": needed}, None
    if acknowledge:
        external.acknowledge(s, user)
    return 200, external.request_payload(s), s


@operation(
    "GET",
    "Read an outside agent's request",
    query=WaitQuery,
    responses={200: ExternalRequest},
    path={"request_id": "The request's id."},
)
@api(["GET"], perm="agents.view_suspension", scope=READ_SCOPES)
def request_detail(request: HttpRequest, request_id: str) -> JsonResponse:
    """A request and its decision. `?wait=N` is served by approvals.external_wait under
    daphne; a server without it (runservers, tests in-process) answers at once."""
    if wait_seconds(request.GET.get("wait")) is None:
        return error(400, "invalid", "wait is a whole number of seconds.", {"wait": "Seconds."})
    status, body, _ = read(request.user, request_id)
    if status == 403:
        return scopes.insufficient(Scope.READ, SEE_OTHERS)
    return JsonResponse(body, status=status)
