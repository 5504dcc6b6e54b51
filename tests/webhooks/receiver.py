"""A webhook receiver for tests: a real HTTP server on 127.0.0.1, in a thread, that keeps
every request and checks each Standard Webhooks signature as it arrives."""

import json
import socket
import threading
import time
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from standardwebhooks import Webhook, WebhookVerificationError


@dataclass
class Received:
    headers: dict[str, str]
    body: bytes
    status: int = 0  # what the receiver answered (0: still answering)
    verified: bool | None = None  # None: no secret to check against
    error: str = ""
    at: float = field(default_factory=time.monotonic)

    @property
    def json(self) -> Any:
        return json.loads(self.body)

    @property
    def webhook_id(self) -> str:
        return self.headers.get("webhook-id", "")


class Receiver:
    """Answers 500 to the first `fail_first` requests of each webhook-id (or of each body,
    for requests without one), sleeps `sleep_first` seconds before its very first answer,
    and 200 otherwise; with `trickle`, it sends its whole answer (status line, headers and
    body) one byte every `trickle` seconds."""

    def __init__(
        self,
        secret: str | None = None,
        fail_first: int = 0,
        sleep_first: float = 0,
        trickle: float = 0,
    ):
        self.secret = secret
        self.fail_first = fail_first
        self.sleep_first = sleep_first
        self.trickle = trickle
        self.requests: list[Received] = []
        self.lock = threading.Lock()
        self.server: ThreadingHTTPServer | None = None

    @property
    def url(self) -> str:
        assert self.server is not None
        return f"http://127.0.0.1:{self.server.server_address[1]}/hooks/gateway"

    def start(self) -> None:
        owner = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                body = self.rfile.read(int(self.headers.get("Content-Length", "0")))
                owner.receive(self, body)

            def log_message(self, format: str, *args: Any) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def stop(self) -> None:
        if self.server is not None:
            self.server.shutdown()
            self.server.server_close()

    def receive(self, handler: BaseHTTPRequestHandler, body: bytes) -> None:
        headers = {k.lower(): v for k, v in handler.headers.items()}
        got = Received(headers=headers, body=body)
        if self.secret is not None:
            try:
                Webhook(self.secret).verify(body, headers)
                got.verified = True
            except WebhookVerificationError as e:
                got.verified, got.error = False, str(e)
        key = got.webhook_id or body.decode(errors="replace")
        with self.lock:
            first = not self.requests
            seen = sum(1 for r in self.requests if (r.webhook_id or r.body.decode()) == key)
            self.requests.append(got)
        if first and self.sleep_first:
            time.sleep(self.sleep_first)
        status = 500 if seen < self.fail_first else 200
        got.status = status
        if self.trickle:
            self.answer_slowly(handler, status)
            return
        try:
            handler.send_response(status)
            handler.send_header("Content-Type", "text/plain")
            handler.end_headers()
            handler.wfile.write(b"ok" if status == 200 else b"not now")
        except OSError:
            pass  # the sender went away (a killed worker)

    def answer_slowly(self, handler: BaseHTTPRequestHandler, status: int) -> None:
        body = b"ok, " * 50
        answer = (
            f"HTTP/1.1 {status} OK\r\nContent-Type: text/plain\r\n"
            f"Content-Length: {len(body)}\r\n\r\n"
        ).encode() + body
        for i in range(len(answer)):
            try:
                handler.wfile.write(answer[i : i + 1])
            except OSError:
                return  # the sender gave up
            time.sleep(self.trickle)

    def ids(self, status: int | None = None) -> list[str]:
        with self.lock:
            return [r.webhook_id for r in self.requests if status is None or r.status == status]

    def events(self, status: int = 200) -> list[dict[str, Any]]:
        """The event messages answered with `status`, in the order they came."""
        with self.lock:
            return [r.json for r in self.requests if r.status == status]


def closed_port_url() -> str:
    """A URL on 127.0.0.1 where nothing listens: a receiver that is down for good."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    return f"http://127.0.0.1:{port}/hooks/gone"
