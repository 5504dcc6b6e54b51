"""GET /api/requests/{id}?wait=N in daphne's event loop: a long poll that holds no thread.

gateway.asgi sends a GET of one request with a `wait` and a bearer token here; everything else
about requests (raising them, reading without waiting, a browser session) goes to Django
(approvals.api.external). The answer is the one that view gives, read by the same function
(approvals.api.external.read): at once when the request is decided or unknown or not the
caller's to read, else once it is decided or `wait` seconds have passed, whichever is first.

While it waits, the reader is a subscriber of the process's event hub (approvals.hub), which
wakes it when an event of the request is written, and reads the request again then (and every
SAFETY_POLL regardless, so a lost wake-up delays the answer at most that long). Every answer
it reads is sent only once the hub has cleared the token against the revocation counter read
after the read (access.clearance), as a socket's events are: a token revoked, or its user
deactivated, before or while the request is read ends the wait with 401, never with what was
read (a decision recorded after the revocation).
"""

import time
from typing import Any

from starlette.requests import Request
from starlette.responses import JSONResponse

from access import scopes
from access.auth import bearer
from access.models import digest
from access.revocation import Credential, revocations
from agents import external
from agents.models import Suspension
from approvals.api.external import READ_SCOPES, SEE_OTHERS, read, wait_seconds
from approvals.waiters import waiting
from infra.aio import blocking, wait_event

SAFETY_POLL = 1.0
PATH_PREFIX = "/api/requests/"
REVOKED = "The token was revoked, or its user deactivated."


def handles(scope: dict[str, Any]) -> bool:
    """Is this HTTP request a long poll of one request by a token (gateway.asgi)?"""
    if scope["method"] != "GET" or not scope["path"].startswith(PATH_PREFIX):
        return False
    if "/" in scope["path"][len(PATH_PREFIX) :]:
        return False
    query = scope.get("query_string", b"")
    headers = dict(scope.get("headers", []))
    return b"wait=" in query and b"authorization" in headers


def _error(status: int, code: str, detail: str, **extra: Any) -> JSONResponse:
    return JSONResponse({"error": code, "detail": detail, **extra}, status_code=status)


async def answer(request: Request) -> JSONResponse:
    header = request.headers.get("authorization", "")
    caller = await blocking(bearer)(header)
    user = caller.user
    if user is None or not user.is_authenticated:
        response = _error(401, "unauthenticated", caller.refusal or "Send a bearer token.")
        response.headers["WWW-Authenticate"] = 'Bearer realm="api"'
        return response
    if not scopes.allows(user, READ_SCOPES):
        response = _error(
            403,
            "insufficient_scope",
            f"This token lacks the scope this needs: {scopes.names(READ_SCOPES)}.",
            scope=scopes.names(READ_SCOPES),
        )
        response.headers["WWW-Authenticate"] = (
            f'Bearer error="insufficient_scope", scope="{" ".join(READ_SCOPES)}"'
        )
        return response
    if not await blocking(user.has_perm)("agents.view_suspension"):
        return _error(403, "forbidden", "You do not have permission to do this.")
    wait = wait_seconds(request.query_params.get("wait"))
    if wait is None:
        return _error(
            400, "invalid", "wait is a whole number of seconds.", fields={"wait": "Seconds."}
        )
    request_id = request.path_params.get("id") or request.url.path[len(PATH_PREFIX) :]
    deadline = time.monotonic() + wait
    raw = header.partition(" ")[2].strip()
    credential = Credential(user.pk, token_digest=digest(raw))
    async with waiting("suspension", request_id, credential) as waiter:
        while True:
            waiter.woken.clear()
            status, body, found, counted = await blocking(_read)(user, request_id)
            if not await waiter.admits(counted):
                return _error(401, "unauthenticated", REVOKED)
            if status == 403:
                return _error(403, "insufficient_scope", SEE_OTHERS, scope=body["scope"])
            left = deadline - time.monotonic()
            if status != 200 or body["status"] != "pending" or left <= 0:
                if found is not None:
                    body = await blocking(_acknowledged)(found, user) or body
                return JSONResponse(body, status_code=status)
            if await request.is_disconnected():
                return JSONResponse(body, status_code=status)
            await wait_event(waiter.woken, min(SAFETY_POLL, left))


def _read(user: Any, request_id: str) -> tuple[int, dict[str, Any], Suspension | None, int]:
    """The request as `user` may read it (approvals.api.external.read), not acknowledged yet,
    and the revocation counter read after it."""
    status, body, found = read(user, request_id, acknowledge=False)
    return status, body, found, revocations()


def _acknowledged(s: Suspension, user: Any) -> dict[str, Any] | None:
    """The asker is answered with the decision: recorded (agents.external.acknowledge), and
    the request as it reads now; None when there was nothing to record."""
    return external.request_payload(s) if external.acknowledge(s, user) else None


async def application(scope: dict[str, Any], receive: Any, send: Any) -> None:
    response = await answer(Request(scope, receive))
    await response(scope, receive, send)
