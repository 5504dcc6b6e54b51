"""POST /a2a: A2A's JSON-RPC binding. The 1.0 method names when the request says
`A2A-Version: 1.0`; the 0.3 names when it says 0.3 or nothing, as the specification has a
server read a missing header; in both, this gateway's own tasks/provideInputAndContinue and
tasks/getInputRequired. Streams answer text/event-stream, one JSON-RPC response per event,
each with its cursor as the SSE id (a2a_server.handler.Cursor).

The SDK's own JSON-RPC server (a2a.server.routes.JsonRpcDispatcher, on Starlette) is not
mounted: it answers every error with HTTP 200 and maps errors it does not know to -32603, so
it cannot answer an anonymous caller 401 or a caller without permission 403 (as the
specification and our REST API do), put a cursor in the SSE id, or serve methods of our own
without overriding its private methods. From the SDK this uses the wire types and their JSON
(protobuf), the RequestHandler interface (a2a_server.handler implements it),
RequestHandler03 and its conversions for the 0.3 names (a2a_server.methods), the error
classes with their codes and error details, and sse-starlette's streaming response.

It runs in daphne's event loop, beside Django (gateway.asgi routes /a2a here): a stream waits
on asyncio, not in a worker thread.
"""

import json
import logging
from collections.abc import AsyncGenerator, AsyncIterator
from typing import Any

from a2a.server.context import ServerCallContext
from a2a.types import (
    InternalError,
    InvalidParamsError,
    InvalidRequestError,
    MethodNotFoundError,
    VersionNotSupportedError,
)
from a2a.utils.error_handlers import ERROR_INFO_TYPE, build_error_details
from a2a.utils.errors import JSON_RPC_ERROR_CODE_MAP, A2AError, JSONParseError
from django.conf import settings
from google.protobuf.message import Message as Proto
from sse_starlette.sse import EventSourceResponse
from starlette.requests import ClientDisconnect, Request
from starlette.responses import JSONResponse, Response

from a2a_server.access import Denied, plain
from a2a_server.methods import (
    GET_INPUT_REQUIRED,
    METHODS_03,
    METHODS_10,
    PROVIDE_INPUT,
    V03,
    V10,
    parse,
    seed_method,
)
from access.auth import bearer
from access.models import digest
from access.ratelimits import Limited
from access.revocation import Credential

# The REST API's check that a body holds only what the database can store (no NUL, no lone
# surrogates, bounded nesting), so a message refused over REST is refused here too.
from approvals.http import BadRequest, _check_storable, loads
from infra.aio import blocking

log = logging.getLogger(__name__)

# A JSON-RPC request's id as the caller sent it (a string or a number), or None when it sent none.
RequestId = str | int | None

# Errors of our own, outside the ranges JSON-RPC and A2A reserve (the specification leaves
# authentication and authorization errors to "a JSON-RPC custom error" with HTTP 401 and 403).
UNAUTHENTICATED = -31401
PERMISSION_DENIED = -31403
RATE_LIMITED = -31429  # HTTP 429 with Retry-After: a rate limit, or the agent's pending cap
DOMAIN = "approval-gateway"
# Comments on an idle stream, well within the 5 s read timeout of the SDK's default client.
PING = 3


class Call:
    """One JSON-RPC request: its id, version and caller."""

    def __init__(self, request_id: RequestId, version: str, context: ServerCallContext) -> None:
        self.id = request_id
        self.version = version
        self.context = context

    def result(self, result: Any) -> dict[str, Any]:
        # Protobuf's JSON writes every number of a data part or metadata as a double (200.0);
        # the client gets back the whole numbers it sent.
        return {"jsonrpc": "2.0", "id": self.id, "result": plain(result)}

    def error(self, error: Exception) -> dict[str, Any]:
        return error_body(self.id, error, self.version)


def error_body(request_id: RequestId, error: Exception, version: str) -> dict[str, Any]:
    """A JSON-RPC error response: A2A's errors with their codes and, in 1.0, their error
    details (google.rpc.ErrorInfo, and BadRequest for invalid params); in 0.3, the data as is."""
    if isinstance(error, Denied | Limited):
        if isinstance(error, Limited):
            code, reason, message = RATE_LIMITED, error.code.upper(), error.detail
            metadata = {"retryAfter": str(error.retry_after)}
        else:
            reason = "UNAUTHENTICATED" if error.status == 401 else "PERMISSION_DENIED"
            code = UNAUTHENTICATED if error.status == 401 else PERMISSION_DENIED
            message = error.message
            # The token scope the call needs, when that is what it lacks (access.scopes).
            metadata = {"scope": error.scope} if error.scope else {}
            if error.rule:
                # The policy's rule that refused a decision (four_eyes, groups, ...).
                metadata["rule"] = error.rule
        data: Any = [
            {"@type": ERROR_INFO_TYPE, "reason": reason, "domain": DOMAIN, "metadata": metadata}
        ]
        if version == V03:
            data = {"reason": reason, **metadata}
        body = {"code": code, "message": message, "data": data}
        return {"jsonrpc": "2.0", "id": request_id, "error": body}
    if not isinstance(error, A2AError):
        error = InternalError("The server failed to answer; try again later.")
    code = next(
        (JSON_RPC_ERROR_CODE_MAP[c] for c in type(error).__mro__ if c in JSON_RPC_ERROR_CODE_MAP),
        -32603,
    )
    body: dict[str, Any] = {"code": code, "message": error.message}
    if version == V10:
        body["data"] = build_error_details(error)
    elif error.data is not None:
        body["data"] = error.data
    return {"jsonrpc": "2.0", "id": request_id, "error": body}


def answer_error(
    request_id: RequestId, error: Exception, version: str, status: int = 200
) -> JSONResponse:
    if isinstance(error, Denied):
        status = error.status
    if isinstance(error, Limited):
        status = 429
    response = JSONResponse(error_body(request_id, error, version), status_code=status)
    if isinstance(error, Limited):
        response.headers["Retry-After"] = str(error.retry_after)
    if status == 401:
        # RFC 9110: a 401 names the scheme that would work (the card's security scheme).
        response.headers["WWW-Authenticate"] = 'Bearer realm="a2a"'
    return response


async def read_body(request: Request) -> bytes | None:
    """The body; None past DATA_UPLOAD_MAX_MEMORY_SIZE, as Django refuses an API request's."""
    limit = settings.DATA_UPLOAD_MAX_MEMORY_SIZE
    body = bytearray()
    async for chunk in request.stream():
        body += chunk
        if limit is not None and len(body) > limit:
            return None
    return bytes(body)


def request_version(request: Request) -> str:
    """The A2A version the request asks for: 1.0 (any 1.x), or 0.3 when it names none."""
    raw = request.headers.get("a2a-version", "").strip() or V03
    major, _, minor = raw.partition(".")
    if major == "1":
        return V10
    if raw == V03 or (major == "0" and minor.split(".")[0] == "3"):
        return V03
    raise VersionNotSupportedError(
        f"A2A version {raw[:20]!r} is not supported: send A2A-Version: 1.0, or 0.3."
    )


async def application(scope: dict[str, Any], receive: Any, send: Any) -> None:
    """The ASGI application of /a2a."""
    request = Request(scope, receive)
    try:
        response = await answer(request)
    except ClientDisconnect:
        return
    await response(scope, receive, send)


async def answer(request: Request) -> Response:
    """Who calls is known before anything else is looked at: an anonymous caller learns
    nothing but that it must authenticate (HTTP 401)."""
    try:
        version = request_version(request)
    except VersionNotSupportedError as e:
        version, refused = V10, e
    else:
        refused = None
    if request.method != "POST":
        response = answer_error(None, InvalidRequestError("Use POST."), version, 405)
        response.headers["Allow"] = "POST"
        return response
    body = await read_body(request)
    if body is None:
        limit = settings.DATA_UPLOAD_MAX_MEMORY_SIZE
        too_large = InvalidRequestError(f"The body is larger than {limit} bytes.")
        return answer_error(None, too_large, version, 413)
    try:
        data = loads(body)  # no NaN or Infinity, as every body of the API
    except (ValueError, RecursionError):
        data, parsed = None, False
    else:
        parsed = True
    request_id = _request_id(data)
    header = request.headers.get("authorization", "")
    caller = await blocking(bearer)(header)
    user = caller.user
    if user is None or not user.is_authenticated:
        why = (
            caller.refusal  # unknown, revoked or expired
            if user is None
            else "Send Authorization: Bearer <token> (python manage.py create_api_token)."
        )
        return answer_error(request_id, Denied(401, why), version)
    if refused is not None:
        return answer_error(request_id, refused, version)
    if not parsed:
        return answer_error(None, JSONParseError("The body is not valid JSON."), version)
    try:
        method, params = _envelope(data)
    except A2AError as e:
        return answer_error(request_id, e, version)
    raw = header.partition(" ")[2].strip()
    context = ServerCallContext(
        state={
            "user": user,
            "headers": {k.lower(): v for k, v in request.headers.items()},
            "credential": Credential(user.pk, token_digest=digest(raw)),
            "method": method,
            "request_id": request_id,
            # A SendMessage that waits for its task stops waiting for a caller who has gone.
            "disconnected": request.is_disconnected,
        }
    )
    call = Call(request_id, version, context)
    try:
        return await dispatch(call, method, params, data)
    except (A2AError, Denied, Limited) as e:
        return answer_error(request_id, e, version)
    except Exception as e:
        log.exception("A2A %s failed", method)
        return answer_error(request_id, e, version)


def _request_id(data: Any) -> RequestId:
    if isinstance(data, dict):
        found = data.get("id")
        if isinstance(found, str | int) and not isinstance(found, bool):
            return found
    return None


def _envelope(data: Any) -> tuple[str, dict[str, Any]]:
    """The method and params of a JSON-RPC 2.0 request object, checked."""
    if isinstance(data, list):
        raise InvalidRequestError("Batch requests are not supported.")
    if not isinstance(data, dict) or data.get("jsonrpc") != "2.0":
        raise InvalidRequestError('A JSON-RPC 2.0 request object: "jsonrpc": "2.0".')
    request_id = data.get("id")
    if request_id is not None and (
        isinstance(request_id, bool) or not isinstance(request_id, str | int)
    ):
        raise InvalidRequestError("The id is a string, a number or null.")
    method = data.get("method")
    if not isinstance(method, str) or not method:
        raise InvalidRequestError("Name the method.")
    params = data.get("params", {})
    if params is None:
        params = {}
    if not isinstance(params, dict):
        raise InvalidParamsError("params is an object.")
    try:
        _check_storable(data)
    except BadRequest as e:
        raise InvalidParamsError(
            e.detail,
            data={"errors": [{"field": k, "message": v} for k, v in (e.fields or {}).items()]},
        ) from e
    return method, params


async def dispatch(call: Call, method: str, params: dict[str, Any], data: dict) -> Response:
    if method in (PROVIDE_INPUT, GET_INPUT_REQUIRED):
        found = await seed_method(method, params, call.version, call.context)
        return JSONResponse(call.result(found))
    table = METHODS_10 if call.version == V10 else METHODS_03
    if method not in table:
        other = METHODS_03 if call.version == V10 else METHODS_10
        if method in other:
            wanted = V03 if call.version == V10 else V10
            raise VersionNotSupportedError(
                f"{method} is an A2A {wanted} method: send A2A-Version: {wanted}"
                + (" (or no A2A-Version header)." if wanted == V03 else ".")
            )
        raise MethodNotFoundError(f"No method {method[:100]!r}.")
    kind, run, streams = table[method]
    request = parse(kind, params, data, call.version)
    if streams:
        return await stream(call, run(request, call.context))
    return JSONResponse(call.result(await run(request, call.context)))


async def stream(call: Call, updates: AsyncIterator[tuple[Any, Any]]) -> Response:
    """An SSE response, one JSON-RPC response per update, the update's cursor as its id. The
    first update is awaited here, so a refused request is answered with a plain error."""
    try:
        first = await anext(updates)
    except StopAsyncIteration:
        first = None

    async def events() -> AsyncGenerator[dict[str, str]]:
        try:
            if first is not None:
                yield sse(call, *first)
            async for update in updates:
                yield sse(call, *update)
        except (A2AError, Denied, Limited) as e:
            yield {"event": "error", "data": json.dumps(call.error(e))}
        except Exception as e:
            log.exception("A2A stream failed")
            yield {"event": "error", "data": json.dumps(call.error(e))}

    return EventSourceResponse(events(), ping=PING)


def sse(call: Call, update: Any, result: Any) -> dict[str, str]:
    """One SSE event; its id is the update's cursor (a 1.0 proto or a 0.3 model carries it in
    its metadata as eventId)."""
    event = {"data": json.dumps(call.result(result))}
    if isinstance(update, Proto):
        cursor = update.metadata["eventId"] if "eventId" in update.metadata else None
    else:
        cursor = (update.metadata or {}).get("eventId")
    if cursor:
        event["id"] = str(cursor)
    return event
