"""ASGI entry point: HTTP through Django, WebSockets through the approvals consumer.

HTTP requests run Django's WSGI handler, whole, in a worker thread. Django's own ASGI handler
would run each sync middleware's hooks and the sync views through a thread hop of their own
(a dozen per request here, which cost more than the request itself); every view and middleware
of this project is synchronous, so one hop per request does the same work. The threads come
from a pool, so a request waiting on the database does not hold up the others.
"""

import inspect
import os
from typing import Any

# daphne's and Twisted's modules need no settings: imported before Django is set up.
from daphne import http_protocol
from twisted.web import http

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "gateway.settings")

from django.core.wsgi import get_wsgi_application

django_wsgi_app = get_wsgi_application()

# The imports below (E402) come after Django is set up: they read settings and models.
from asgiref.sync import sync_to_async  # noqa: E402
from asgiref.wsgi import WsgiToAsgi, WsgiToAsgiInstance  # noqa: E402
from channels.routing import ProtocolTypeRouter, URLRouter  # noqa: E402
from django.conf import settings  # noqa: E402

from a2a_server.rpc import application as a2a_application  # noqa: E402
from access.auth import WebSocketAuth  # noqa: E402
from approvals import external_wait  # noqa: E402
from approvals.routing import websocket_urlpatterns  # noqa: E402
from infra.forwarded import ProxyHeaders, networks  # noqa: E402
from mcp_gateway import proxy as mcp_proxy  # noqa: E402


class _WebRequest(http_protocol.WebRequest):
    """daphne's request, without Twisted parsing a POSTed form or multipart body into `args`,
    which daphne never reads (it hands the body to the application as it came, and Django
    parses it again). Twisted parsed each POST's Content-Type with the `email` package, a cost
    on every POST (bench/README.md), and a multipart upload whole, in memory, twice."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, parsePOSTFormSubmission=False, **kwargs)


# daphne's HTTPFactory gives each connection the request class this name holds when it opens.
if "parsePOSTFormSubmission" in inspect.signature(http.Request.__init__).parameters:
    http_protocol.WebRequest = _WebRequest


def _respond(instance: "_Request", body: Any) -> list[dict[str, Any]]:
    """In a pooled thread: Django's answer to the request, as the messages the loop sends
    once the thread is done; a streamed one (a file, an export) is sent from here, chunk by
    chunk, as asgiref sends every answer, and nothing is left for the loop."""
    try:
        environ = instance.build_environ(instance.scope, body)
    except ValueError:
        return [
            {
                "type": "http.response.start",
                "status": 400,
                "headers": [(b"content-type", b"text/plain")],
            },
            {"type": "http.response.body", "body": b"Bad Request: Too many duplicate headers"},
        ]
    response = instance.wsgi_application(environ, instance.start_response)
    if getattr(response, "streaming", True):
        instance.stream(response)
        return []
    content = b"".join(response)
    if instance.response_content_length is not None:
        # No more than the Content-Length it gave, as asgiref sends.
        content = content[: instance.response_content_length]
    instance.response_started = True
    return [instance.response_start, {"type": "http.response.body", "body": content}]


class _Request(WsgiToAsgiInstance):
    """One request, Django's WSGI handler run whole in a pooled thread. Not thread-sensitive:
    requests run side by side in the pool instead of one at a time in a single shared thread
    (Django keeps a database connection per thread). An answer that is not streamed is sent
    by the loop once the thread is done: asgiref sends each of an answer's three messages from
    the thread, each a hop to the loop and back (AsyncToSync): a third of a small request's
    CPU in daphne (bench/README.md)."""

    _respond = sync_to_async(_respond, thread_sensitive=False)

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        self.loop_send = send
        await super().__call__(scope, receive, send)

    async def run_wsgi_app(self, body: Any) -> None:  # what WsgiToAsgiInstance.__call__ awaits
        for message in await self._respond(body):
            await self.loop_send(message)

    def stream(self, response: Any) -> None:
        """A streamed answer, chunk by chunk from this thread, as asgiref sends it."""
        sent = 0
        for output in response:
            if not self.response_started:
                self.response_started = True
                self.sync_send(self.response_start)
            if self.response_content_length is not None:
                output = output[: self.response_content_length - sent]
            self.sync_send({"type": "http.response.body", "body": output, "more_body": True})
            sent += len(output)
            if sent == self.response_content_length:
                break
        if not self.response_started:
            self.response_started = True
            self.sync_send(self.response_start)
        self.sync_send({"type": "http.response.body"})


class DjangoHTTP(WsgiToAsgi):
    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        await _Request(self.wsgi_application, self.duplicate_header_limit)(scope, receive, send)


class HTTPRouter:
    """/a2a is answered in the event loop (a2a_server.rpc: its streams stay open for as long
        as a task runs, which must not hold a worker thread), and so is a long poll of an outside
        agent's request (approvals.external_wait), and so is /mcp/<name> (mcp_gateway.proxy: a
    gated tool call is held until it is decided); everything else by Django."""

    def __init__(self, django: DjangoHTTP) -> None:
        self.django = django

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["path"] == "/a2a":
            await a2a_application(scope, receive, send)
        elif mcp_proxy.handles(scope):
            # An MCP endpoint: a gated call is held in the loop until it is decided.
            await mcp_proxy.application(scope, receive, send)
        elif external_wait.handles(scope):
            # A long poll of an outside agent's request: it waits in the loop, not a thread.
            await external_wait.application(scope, receive, send)
        else:
            await self.django(scope, receive, send)


application = ProtocolTypeRouter(
    {
        "http": HTTPRouter(DjangoHTTP(django_wsgi_app)),
        "websocket": WebSocketAuth(URLRouter(websocket_urlpatterns)),
    }
)
if settings.PROXY_HEADERS:
    # Behind a proxy (`serve --proxy-headers`): the client's address, not the proxy's.
    application = ProxyHeaders(application, networks(settings.TRUSTED_PROXIES))
