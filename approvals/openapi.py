"""The OpenAPI 3.1 document of the JSON API (/api/openapi.json), built from the code.

Why this and not a library: the views are plain Django function views behind
access.auth.api (session or token, scopes, rate limits, the JSON error shape). django-ninja
or DRF with drf-spectacular would mean rewriting every view and its errors around their
request parsing. pydantic (installed with a2a-sdk) already turns classes into JSON Schema
2020-12, which OpenAPI 3.1 takes as it is; what is left is this registry: a view declares its
operations with @operation, and build() walks Django's URL resolver, so the paths, their
parameters and the methods come from the URLconf and the views themselves.

How to describe an endpoint (a request body in approvals/api/bodies.py, where the view parses
the body with it too, approvals.contract; other models next to the view, or in
approvals/schemas.py when several views share them):

    class StartRun(Body):                    # a request body; unknown fields are refused
        agent: str = Field(description="The agent to run.")
        message: str

    class ThreadQuery(Query):                # query parameters: one field each
        status: ThreadStatus | None = None

    @operation("POST", "Start a run", body=StartRun, responses={201: Thread}, errors=(429,))
    @operation("GET", "List runs", query=ThreadQuery, responses={200: ThreadPage})
    @api(["GET", "POST"], ...)
    def threads(request): ...

@operation goes above @api (it marks the function the URLconf holds). Path parameters come
from the route (`<str:thread_id>` → `{thread_id}`, a string; `<int:...>`, an integer); describe
one with `path={"thread_id": "The thread's id."}`. `responses` maps a status to a model, or
to None for an answer without a body; the view's docstring is the description unless
`description` says otherwise. Every operation also gets 401 and 403; 400 when it takes a body,
a query or path parameters; 404 with path parameters; 413 with a body; 429 when @api counts
it against a rate limit; `errors` adds others (409...), all with the Error model.

tests/approvals/test_openapi.py fails when an /api/ URL, or a method its view accepts, is not
described, and runs schemathesis against a live server over every operation described here.
"""

import re
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any, ClassVar, TypeVar

from django.conf import settings
from django.contrib.auth.decorators import login_required
from django.http import HttpRequest, HttpResponse, JsonResponse
from django.shortcuts import render
from django.urls import URLPattern, URLResolver, get_resolver
from pydantic import BaseModel, ConfigDict
from pydantic.json_schema import models_json_schema

from access.auth import api
from infra.version import version

View = TypeVar("View", bound=Callable[..., Any])


class Body(BaseModel):
    """A JSON request body; the view parses the body with it too (approvals.contract.parse):
    strict JSON types (no "5" for 5, no 1 for true), and no field the model does not name."""

    model_config = ConfigDict(extra="forbid", strict=True)

    # A refusal in the API's words (approvals.contract): the answer's `detail`; the detail
    # when a field is unknown (None: `refused`); and each field's message, by its path
    # ("seen.args_hash"), for whatever pydantic finds wrong in it (missing, a wrong type, out
    # of range). A callable is read when a body is refused, so a changed setting applies.
    refused: ClassVar[str] = "The request is not valid."
    unknown: ClassVar[str | None] = None
    says: ClassVar[Mapping[str, str | Callable[[], str]]] = {}


class Query(BaseModel):
    """Query parameters, one per field."""


class Answer(BaseModel):
    """A JSON answer: fields not named may be added later, so clients must ignore them."""

    model_config = ConfigDict(extra="allow")


class Error(Answer):
    """Every error answer (approvals.http.error)."""

    error: str
    detail: str
    fields: dict[str, str] | None = None


# The document's description: what the API is for, before the operations.
DESCRIPTION = """\
The approval gateway puts a person between an AI agent and its sensitive tool calls (delete,
pay, send, publish). This API is how agents and reviewers' tools reach it:

- **Raise a request.** An agent that runs elsewhere asks before it acts: `POST /api/requests`
  with the tool and its arguments (or a question), an idempotency key and its run's id.
  Agents that run inside the gateway are started with `POST /api/threads`; each blocking tool
  call they make becomes a request by itself, and the run waits, saved, until it is decided.
- **Wait for the decision.** `GET /api/requests/{request_id}?wait=N` answers as soon as the
  request is decided (a long poll, up to 60 s at a time); `GET /api/threads/{thread_id}`
  says where a run stands. Events also come over the `/ws/events/` socket and by webhook.
- **Decide.** Whoever the agent's policy lets (groups, four eyes, quorum, rules on the
  arguments) approves, approves edited arguments, rejects with a reason, answers, or
  dismisses: `POST /api/threads/{thread_id}/suspensions/{suspension_id}/resume` for one
  request, `POST /api/decisions` for many. A request nobody decides is decided by its
  deadline.
- **Receipts and the trail.** Every decision carries a signed receipt (a compact JWS,
  EdDSA) over the request, the arguments approved, the outcome and who decided; anyone can
  check it with the public keys at `/.well-known/jwks.json`. `GET /api/events` lists the
  events of the hash-chained audit trail.

Every endpoint needs a caller: `Authorization: Bearer <token>` from
`manage.py create_api_token` (its scopes: `runs`, `read`, `decide`, `admin`), or a browser
session (with the `X-CSRFToken` header on changes). Errors are JSON:
`{"error": code, "detail": text, "fields": {...}}`. Answers may gain fields: ignore the ones
you do not know."""

# What each error status means when an operation does not say more.
ERRORS = {
    400: "The request is not valid: `fields` names each bad field.",
    401: "No caller: log in, or send Authorization: Bearer <token>.",
    403: "The caller may not do this (a missing permission or token scope, or a policy).",
    404: "No such resource.",
    409: "The resource's state does not allow it.",
    413: "The body is larger than DATA_UPLOAD_MAX_MEMORY_SIZE.",
    429: "Too many too fast: `Retry-After` says when to try again.",
}


@dataclass
class Operation:
    method: str
    summary: str
    description: str | None
    body: type[BaseModel] | None
    query: type[BaseModel] | None
    responses: dict[int, type[BaseModel] | None]
    errors: tuple[int, ...]
    path: dict[str, str] = field(default_factory=dict)


def operation(
    method: str,
    summary: str,
    *,
    responses: dict[int, type[BaseModel] | None],
    body: type[BaseModel] | None = None,
    query: type[BaseModel] | None = None,
    errors: Iterable[int] = (),
    path: dict[str, str] | None = None,
    description: str | None = None,
) -> Callable[[View], View]:
    """Describe one method of the view below it (see the module's docstring)."""

    def mark(view: View) -> View:
        found = dict(getattr(view, "openapi", {}))
        found[method.upper()] = Operation(
            method.upper(),
            summary,
            description,
            body,
            query,
            responses,
            tuple(errors),
            path or {},
        )
        view.openapi = found  # type: ignore[attr-defined]  # read back with getattr
        return view

    return mark


@dataclass
class Route:
    """One URL of the API as the resolver has it."""

    path: str  # /api/threads/{thread_id}
    params: dict[str, str]  # name → converter ("str", "int", ...)
    view: Callable[..., Any]


CONVERTER = re.compile(r"<(?:(?P<conv>[^>:]+):)?(?P<name>\w+)>")


def api_routes() -> Iterator[Route]:
    """Every URL under /api/, from Django's resolver (the order of gateway/urls.py)."""

    def walk(patterns: list[Any], prefix: str) -> Iterator[Route]:
        for p in patterns:
            route = prefix + str(p.pattern)
            if isinstance(p, URLResolver):
                yield from walk(p.url_patterns, route)
            elif isinstance(p, URLPattern) and route.startswith("api/"):
                params = {m["name"]: m["conv"] or "str" for m in CONVERTER.finditer(route)}
                yield Route("/" + CONVERTER.sub(r"{\g<name>}", route), params, p.callback)

    yield from walk(get_resolver().url_patterns, "")


def _doc(view: Callable[..., Any]) -> str | None:
    text = (view.__doc__ or "").strip()
    return re.sub(r"\s*\n\s*", " ", text) or None


def _ref(model: type[BaseModel]) -> dict[str, str]:
    return {"$ref": f"#/components/schemas/{model.__name__}"}


def _json(model: type[BaseModel] | None, description: str) -> dict[str, Any]:
    answer: dict[str, Any] = {"description": description}
    if model is not None:
        answer["content"] = {"application/json": {"schema": _ref(model)}}
    return answer


def _query_parameters(model: type[BaseModel]) -> list[dict[str, Any]]:
    schema = model.model_json_schema(ref_template="#/components/schemas/{model}")
    required = set(schema.get("required", ()))
    found = []
    for name, prop in schema["properties"].items():
        prop = dict(prop)
        prop.pop("title", None)
        param = {"name": name, "in": "query", "required": name in required, "schema": prop}
        if "description" in prop:
            param["description"] = prop.pop("description")
        found.append(param)
    return found


def _operation(route: Route, op: Operation, view: Callable[..., Any]) -> dict[str, Any]:
    name = view.__name__.strip("_")
    found: dict[str, Any] = {
        "operationId": f"{name}_{op.method.lower()}",
        "summary": op.summary,
        "tags": [route.path.split("/")[2]],
    }
    if description := op.description or _doc(view):
        found["description"] = description
    params = [
        {
            "name": name,
            "in": "path",
            "required": True,
            "schema": {"type": "integer", "minimum": 0} if conv == "int" else {"type": "string"},
            **({"description": op.path[name]} if name in op.path else {}),
        }
        for name, conv in route.params.items()
    ]
    if op.query is not None:
        params += _query_parameters(op.query)
    if params:
        found["parameters"] = params
    if op.body is not None:
        found["requestBody"] = {
            "required": True,
            "content": {"application/json": {"schema": _ref(op.body)}},
        }
    responses = {
        str(status): _json(model, _status_text(status)) for status, model in op.responses.items()
    }
    errors = {401, 403, *op.errors}
    if op.body is not None or params:
        errors.add(400)
    if route.params:
        errors.add(404)
    if op.body is not None:
        errors.add(413)
    if getattr(view, "api_limit", None) and op.method == "POST":
        errors.add(429)
    for status in sorted(errors):
        responses.setdefault(str(status), _json(Error, ERRORS.get(status, "An error.")))
    found["responses"] = responses
    return found


def _status_text(status: int) -> str:
    return {200: "OK", 201: "Created", 202: "Accepted", 204: "No content"}.get(status, "Answer")


def undescribed() -> list[str]:
    """The API's URLs and methods that no @operation describes, as "METHOD /path"."""
    missing = []
    for route in api_routes():
        ops = getattr(route.view, "openapi", None)
        if getattr(route.view, "openapi_skip", False):
            continue
        methods = getattr(route.view, "api_methods", None) or (ops or {}).keys() or ["?"]
        missing += [f"{m} {route.path}" for m in methods if m not in (ops or {})]
    return missing


# The document's sections, in the order a reader needs them; others follow in URL order.
TAGS = {
    "threads": "Runs: start, read, reply, cancel; decide their suspensions.",
    "suspensions": "What waits for a decision or an answer.",
    "decisions": "Several suspensions decided in one call, each as resumeExecution decides.",
    "events": "The audit trail.",
    "requests": "Requests of agents that run elsewhere.",
    "webhooks": "Staff: webhook subscriptions and their deliveries.",
    "metrics": "Staff: conversation figures and the tiers of review.",
}


def _section(route: Route) -> int:
    tag = route.path.split("/")[2]
    return list(TAGS).index(tag) if tag in TAGS else len(TAGS)


def build() -> dict[str, Any]:
    """The whole document."""
    paths: dict[str, dict[str, Any]] = {}
    models: set[type[BaseModel]] = {Error}
    ids: set[str] = set()
    for route in sorted(api_routes(), key=_section):
        ops = getattr(route.view, "openapi", None)
        if not ops:
            continue
        item = paths.setdefault(route.path, {})
        for method, op in ops.items():
            item[method.lower()] = found = _operation(route, op, route.view)
            # OpenAPI wants each operationId once (two views of one name in two modules).
            if found["operationId"] in ids:
                found["operationId"] = (
                    f"{route.view.__module__.replace('.', '_')}_{found['operationId']}"
                )
            ids.add(found["operationId"])
            models.update(m for m in (op.body, *op.responses.values()) if m is not None)
    ordered = sorted(models, key=lambda m: m.__name__)
    _, schemas = models_json_schema(
        [(m, "validation") for m in ordered], ref_template="#/components/schemas/{model}"
    )
    return {
        "openapi": "3.1.0",
        "info": {
            "title": "Approval gateway API",
            "version": version(),
            "description": DESCRIPTION,
        },
        "security": [{"bearer": []}, {"session": []}],
        "tags": [{"name": name, "description": text} for name, text in TAGS.items()],
        "paths": paths,
        "components": {
            "schemas": schemas.get("$defs", {}),
            "securitySchemes": {
                "bearer": {"type": "http", "scheme": "bearer", "bearerFormat": "gw_…"},
                "session": {"type": "apiKey", "in": "cookie", "name": settings.SESSION_COOKIE_NAME},
            },
        },
    }


class Document(Answer):
    """The OpenAPI 3.1 document."""

    openapi: str
    paths: dict[str, Any]


@operation("GET", "This document", responses={200: Document})
@api(["GET"])
def document(request: HttpRequest) -> JsonResponse:
    """The OpenAPI 3.1 document of this API, generated from the views (approvals.openapi)."""
    return JsonResponse(build(), json_dumps_params={"ensure_ascii": False})


@login_required
def docs(request: HttpRequest) -> HttpResponse:
    """The vendored Swagger UI (static/vendor/swagger-ui), reading /api/openapi.json."""
    return render(request, "approvals/api_docs.html")


# A page for people, not an API operation.
docs.openapi_skip = True  # type: ignore[attr-defined]
