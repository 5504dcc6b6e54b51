"""gateway.asgi: what it changes in daphne."""

from types import SimpleNamespace

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
