"""Who is calling: a session (browsers, with CSRF) or a bearer token (clients)."""

from collections.abc import Callable
from functools import wraps
from typing import Any

from channels.auth import AuthMiddlewareStack
from channels.db import database_sync_to_async
from channels.security.websocket import AllowedHostsOriginValidator
from django.contrib.auth.models import AnonymousUser
from django.http import HttpRequest, HttpResponse
from django.middleware.csrf import CsrfViewMiddleware
from django.utils import timezone
from django.views.decorators.csrf import csrf_exempt

from approvals.http import error
from approvals.models import ApiToken, digest


def token_user(request: HttpRequest) -> Any:
    """The token's user, None for a bad token, AnonymousUser when no token was sent."""
    return authorization_user(request.headers.get("Authorization", ""))


def authorization_user(header: str) -> Any:
    """The user of an Authorization header's bearer token (see token_user)."""
    if not header:
        return AnonymousUser()
    scheme, _, raw = header.partition(" ")
    if scheme.lower() != "bearer" or not raw.strip():
        return None
    token = ApiToken.objects.select_related("user").filter(digest=digest(raw.strip())).first()
    if token is None or not token.user.is_active:
        return None
    now = timezone.now()
    if token.last_used_at is None or (now - token.last_used_at).total_seconds() > 60:
        ApiToken.objects.filter(pk=token.pk).update(last_used_at=now)
    return token.user


def _csrf_failure(request: HttpRequest) -> HttpResponse | None:
    check = CsrfViewMiddleware(lambda r: HttpResponse())
    check.process_request(request)
    return check.process_view(request, None, (), {})


def _unauthenticated(detail: str) -> HttpResponse:
    response = error(401, "unauthenticated", detail)
    # RFC 9110: a 401 names the scheme that would work, so a client knows to send a token.
    response["WWW-Authenticate"] = 'Bearer realm="api"'
    return response


def api(methods: list[str], perm: str | None = None) -> Callable:
    """An API view: JSON errors, the caller authenticated and authorized before the view runs."""

    def decorate(view: Callable) -> Callable:
        @csrf_exempt
        @wraps(view)
        def wrapper(request: HttpRequest, *args: Any, **kwargs: Any) -> HttpResponse:
            user = token_user(request)
            if user is None:
                return _unauthenticated("The bearer token is not valid.")
            if user.is_authenticated:
                request.user = user
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
            if perm and not request.user.has_perm(perm):
                return error(403, "forbidden", "You do not have permission to do this.")
            return view(request, *args, **kwargs)

        return wrapper

    return decorate


class WebSocketAuth:
    """Who opens a socket: a bearer token when the client sends an Authorization header (API
    clients; a browser never sends one by itself, so no origin check is needed), else the
    browser's session, with its origin checked against ALLOWED_HOSTS."""

    def __init__(self, inner: Any) -> None:
        self.with_token = inner
        self.with_session = AllowedHostsOriginValidator(AuthMiddlewareStack(inner))

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> Any:
        header = dict(scope.get("headers", [])).get(b"authorization")
        if header is None:
            return await self.with_session(scope, receive, send)
        user = await database_sync_to_async(authorization_user)(header.decode("latin1"))
        # A bad token is an anonymous caller: the consumer closes with 4401.
        return await self.with_token({**scope, "user": user or AnonymousUser()}, receive, send)
