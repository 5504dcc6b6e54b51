"""Who is calling: a session (browsers, with CSRF) or a bearer token (clients)."""

from collections.abc import Callable
from dataclasses import dataclass
from functools import wraps
from typing import Any

from channels.auth import AuthMiddlewareStack
from channels.db import database_sync_to_async
from channels.security.websocket import OriginValidator
from django.conf import settings
from django.contrib.auth.models import AnonymousUser
from django.http import HttpRequest, HttpResponse
from django.middleware.csrf import CsrfViewMiddleware
from django.utils import timezone
from django.views.decorators.csrf import csrf_exempt

from access import permbackend, ratelimits, scopes, statements
from access.models import ApiToken, digest
from access.scopes import Needed
from infra.answers import error


def token_user(request: HttpRequest) -> Any:
    """The token's user, None for a bad token, AnonymousUser when no token was sent."""
    return authorization_user(request.headers.get("Authorization", ""))


@dataclass(frozen=True)
class Bearer:
    """Who an Authorization header says is calling: `user` is the token's user (its
    `api_token` attribute is the token, so access.scopes can tell what it may do),
    AnonymousUser when no header was sent, None when the header was refused, and `refusal`
    then says why (unknown, revoked or expired)."""

    user: Any
    refusal: str = ""


INVALID = "The bearer token is not valid."


def _token(wanted: str) -> ApiToken | None:
    """The token with this digest, its user loaded with it and, on PostgreSQL, the user's
    permissions with them (what ModelBackend would cache)."""
    found = statements.token_with_user(wanted)
    if found is None:
        return None
    token, permissions = found
    if permissions is not None and not token.user.is_superuser:
        # A superuser has every permission: the backend gives them all (access.permbackend).
        permbackend.remember_permissions(token.user, permissions)
    return token


def bearer(header: str) -> Bearer:
    if not header:
        return Bearer(AnonymousUser())
    scheme, _, raw = header.partition(" ")
    if scheme.lower() != "bearer" or not raw.strip():
        return Bearer(None, INVALID)
    token = _token(digest(raw.strip()))
    if token is None or not token.user.is_active:
        return Bearer(None, INVALID)
    now = timezone.now()
    if refused := token.refusal(now):
        return Bearer(None, refused)
    if token.last_used_at is None or (now - token.last_used_at).total_seconds() > 60:
        ApiToken.objects.filter(pk=token.pk).update(last_used_at=now)
    user = token.user
    user.api_token = token
    return Bearer(user)


def authorization_user(header: str) -> Any:
    """The user of an Authorization header's bearer token (see token_user)."""
    return bearer(header).user


def _csrf_failure(request: HttpRequest) -> HttpResponse | None:
    check = CsrfViewMiddleware(lambda r: HttpResponse())
    check.process_request(request)
    return check.process_view(request, None, (), {})


def _unauthenticated(detail: str) -> HttpResponse:
    response = error(401, "unauthenticated", detail)
    # RFC 9110: a 401 names the scheme that would work, so a client knows to send a token.
    response["WWW-Authenticate"] = 'Bearer realm="api"'
    return response


def api(
    methods: list[str],
    perm: str | None = None,
    scope: Needed | dict[str, Needed] | None = None,
    limit: str | None = None,
) -> Callable:
    """An API view: JSON errors, the caller authenticated and authorized before the view runs.

    `scope`: what a token needs (access.scopes.Needed, or one per method); a session needs
    none. `limit`: the rate limit (access.ratelimits) a POST counts against."""

    def decorate(view: Callable) -> Callable:
        @csrf_exempt
        @wraps(view)
        def wrapper(request: HttpRequest, *args: Any, **kwargs: Any) -> HttpResponse:
            caller = bearer(request.headers.get("Authorization", ""))
            if caller.user is None:
                return _unauthenticated(caller.refusal)
            if caller.user.is_authenticated:
                request.user = caller.user
            elif request.user.is_authenticated:
                if request.method not in ("GET", "HEAD", "OPTIONS") and _csrf_failure(request):
                    return error(
                        403, "csrf_failed", "CSRF verification failed; send the X-CSRFToken header."
                    )
            else:
                return _unauthenticated("Log in, or send Authorization: Bearer <token>.")
            if request.method not in methods:
                response = error(405, "method_not_allowed", f"Use {' or '.join(methods)}.")
                response["Allow"] = ", ".join(methods)
                return response
            needed = scope.get(request.method) if isinstance(scope, dict) else scope
            if needed and not scopes.allows(request.user, needed):
                return scopes.insufficient(needed)
            if perm and not request.user.has_perm(perm):
                return error(403, "forbidden", "You do not have permission to do this.")
            if limit and request.method == "POST":
                try:
                    ratelimits.hit(limit, request.user)
                except ratelimits.Limited as e:
                    return ratelimits.too_many(e)
            return view(request, *args, **kwargs)

        # What approvals.openapi checks each described view against.
        wrapper.api_methods = tuple(methods)
        wrapper.api_limit = limit
        return wrapper

    return decorate


class SiteOriginValidator(OriginValidator):
    """Only pages of the site itself may open a session socket: their origin must equal one of
    WEBSOCKET_ALLOWED_ORIGINS in scheme, host and port. channels' AllowedHostsOriginValidator
    compares the host alone, so a page on another port of the same host would read every event
    with a reviewer's cookies. OriginValidator compares all three when given full origins
    (gateway/settings.py accepts nothing else); the list is read per connection rather than
    once at import, so a deployment's settings, and a test's, apply."""

    def __init__(self, application: Any) -> None:
        super().__init__(application, allowed_origins=())

    def valid_origin(self, parsed_origin: Any) -> bool:
        # No Origin header: not a browser page, and a session socket is only for those.
        return parsed_origin is not None and any(
            self.match_allowed_origin(parsed_origin, origin)
            for origin in settings.WEBSOCKET_ALLOWED_ORIGINS
        )


class WebSocketAuth:
    """Who opens a socket: a bearer token when the client sends an Authorization header (API
    clients; a browser never sends one by itself, so no origin check is needed), else the
    browser's session, with its origin checked (SiteOriginValidator)."""

    def __init__(self, inner: Any) -> None:
        self.with_token = inner
        self.with_session = SiteOriginValidator(AuthMiddlewareStack(inner))

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> Any:
        header = dict(scope.get("headers", [])).get(b"authorization")
        if header is None:
            return await self.with_session(scope, receive, send)
        value = header.decode("latin1")
        user = await database_sync_to_async(authorization_user)(value)
        # A bad token is an anonymous caller: the consumer closes with 4401. The token's digest
        # stays in the scope, so the socket closes once the token is revoked, expires or is deleted
        # (access.revocation).
        _, _, raw = value.partition(" ")
        scope = {**scope, "user": user or AnonymousUser(), "token_digest": digest(raw.strip())}
        return await self.with_token(scope, receive, send)
