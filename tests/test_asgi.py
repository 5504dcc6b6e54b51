"""gateway.asgi: what it changes in daphne and asgiref."""

import asyncio
import threading
from collections.abc import Iterator
from types import SimpleNamespace
from typing import Any

from asgiref.testing import ApplicationCommunicator
from daphne import http_protocol
from twisted.web.test.requesthelper import DummyChannel

import gateway.asgi


def test_daphne_requests_leave_a_posted_form_unparsed() -> None:
    # The class daphne's HTTPFactory gives each connection's requests.
    assert http_protocol.WebRequest is gateway.asgi._WebRequest
    channel = DummyChannel()
    channel.factory = SimpleNamespace(server=SimpleNamespace(protocol_connected=lambda r: None))
    request = http_protocol.WebRequest(channel)
    request.process = lambda: None  # daphne's would hand the request to the application
    request.requestHeaders.setRawHeaders(b"content-type", [b"application/x-www-form-urlencoded"])
    request.requestHeaders.setRawHeaders(b"content-length", [b"7"])
    request.gotLength(7)
    request.handleContentChunk(b"a=1&b=2")
    request.requestReceived(b"POST", b"/api/threads", b"HTTP/1.1")
    assert request.args == {}  # Twisted's own Request would have {b"a": [b"1"], b"b": [b"2"]}
    request.content.seek(0)
    assert request.content.read() == b"a=1&b=2"  # what daphne hands the application


# Django's answers through gateway.asgi.DjangoHTTP, as daphne hands them on ------------------

SCOPE = {
    "type": "http",
    "asgi": {"version": "3.0"},
    "http_version": "1.1",
    "method": "GET",
    "scheme": "http",
    "path": "/",
    "raw_path": b"/",
    "query_string": b"",
    "root_path": "",
    "headers": [(b"host", b"testserver")],
    "client": ("127.0.0.1", 50000),
    "server": ("127.0.0.1", 80),
}


class Answer(list):
    """What Django's WSGI handler returns for an answer it does not stream (an HttpResponse):
    its content in parts, and `streaming` False."""

    streaming = False


def served(app: Any) -> tuple[list[dict[str, Any]], set[int]]:
    """The messages `app` (a WSGI application) sends through DjangoHTTP for one GET, and the
    threads it ran in."""
    threads: set[int] = set()

    def wsgi(environ: dict[str, Any], start_response: Any) -> Any:
        threads.add(threading.get_ident())
        return app(environ, start_response)

    async def go() -> list[dict[str, Any]]:
        communicator = ApplicationCommunicator(gateway.asgi.DjangoHTTP(wsgi), dict(SCOPE))
        await communicator.send_input({"type": "http.request", "body": b""})
        messages = [await communicator.receive_output(5)]
        while messages[-1]["type"] != "http.response.body" or messages[-1].get("more_body"):
            messages.append(await communicator.receive_output(5))
        await communicator.wait(5)
        return messages

    return asyncio.run(go()), threads


def test_an_answer_not_streamed_is_sent_whole_after_its_thread() -> None:
    def app(environ: dict[str, Any], start_response: Any) -> Answer:
        start_response(
            "201 Created", [("Content-Type", "application/json"), ("Content-Length", "9")]
        )
        return Answer([b'{"id":', b" 7}", b"past the length"])

    messages, threads = served(app)
    assert messages == [
        {
            "type": "http.response.start",
            "status": 201,
            "headers": [(b"content-type", b"application/json"), (b"content-length", b"9")],
        },
        # No more than its Content-Length, as asgiref sends.
        {"type": "http.response.body", "body": b'{"id": 7}'},
    ]
    assert threading.get_ident() not in threads  # Django ran in a pooled thread


def test_a_streamed_answer_is_sent_chunk_by_chunk() -> None:
    sent_first: list[bool] = []

    def app(environ: dict[str, Any], start_response: Any) -> Iterator[bytes]:
        start_response("200 OK", [("Content-Type", "text/csv")])
        yield b"a,b\n"
        sent_first.append(True)
        yield b"1,2\n"

    messages, _ = served(app)
    assert [m.get("body") for m in messages] == [None, b"a,b\n", b"1,2\n", None]
    assert messages[0]["status"] == 200
    assert [m.get("more_body", False) for m in messages[1:]] == [True, True, False]
    assert sent_first == [True]
