"""A small local stand-in for Anthropic's Messages API: POST /v1/messages answered with the
API's own JSON (a message whose content is a tool_use block, or an error body with its
status), every request recorded for the tests to read.

The reviewing model's real client (the `anthropic` SDK) is pointed here by ANTHROPIC_BASE_URL.
What it answers is set per test: `decide(decision, reason)` answers with that decision in the
forced `decide` tool call; `fail(500)` answers an API error; `slow(seconds)` answers only
after the client gave up; `malformed()` answers a tool call whose input breaks the schema.
"""

import json
import threading
import time
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any


@dataclass
class Reply:
    status: int = 200
    tool_input: Any = None
    delay: float = 0.0


@dataclass
class MessagesStandIn:
    port: int = 0
    requests: list[dict[str, Any]] = field(default_factory=list)
    bodies: list[bytes] = field(default_factory=list)
    reply: Reply = field(default_factory=Reply)
    _server: ThreadingHTTPServer | None = None
    _lock: threading.Lock = field(default_factory=threading.Lock)

    @property
    def url(self) -> str:
        assert self._server is not None
        return f"http://127.0.0.1:{self._server.server_address[1]}"

    def start(self) -> "MessagesStandIn":
        standin = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                standin._handle(self)

            def log_message(self, *args: Any) -> None:
                pass

        self._server = ThreadingHTTPServer(("127.0.0.1", self.port), Handler)
        self._server.daemon_threads = True
        threading.Thread(target=self._server.serve_forever, daemon=True).start()
        return self

    def stop(self) -> None:
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()

    # What it answers --------------------------------------------------------------------

    def decide(self, decision: str, reason: str) -> None:
        self.reply = Reply(tool_input={"decision": decision, "reason": reason})

    def fail(self, status: int) -> None:
        self.reply = Reply(status=status)

    def slow(self, seconds: float) -> None:
        self.reply = Reply(tool_input={"decision": "approve", "reason": "late"}, delay=seconds)

    def malformed(self) -> None:
        self.reply = Reply(tool_input={"decision": "maybe", "reason": 7})

    # Serving ------------------------------------------------------------------------------

    def _handle(self, handler: BaseHTTPRequestHandler) -> None:
        length = int(handler.headers.get("content-length") or 0)
        raw = handler.rfile.read(length)
        with self._lock:
            self.bodies.append(raw)
            self.requests.append(json.loads(raw or b"{}"))
            reply = self.reply
        if handler.path.split("?")[0] != "/v1/messages":
            self._send(handler, 404, _error("not_found_error", "Not found"))
            return
        if reply.delay:
            time.sleep(reply.delay)
        if reply.status != 200:
            self._send(handler, reply.status, _error("api_error", "Internal server error"))
            return
        body = json.loads(raw)
        self._send(handler, 200, _message(body.get("model", ""), reply.tool_input))

    @staticmethod
    def _send(handler: BaseHTTPRequestHandler, status: int, body: dict[str, Any]) -> None:
        data = json.dumps(body).encode()
        try:
            handler.send_response(status)
            handler.send_header("content-type", "application/json")
            handler.send_header("request-id", "req_011CSHoEeqs5C35K2UUqR7Fy")
            handler.send_header("content-length", str(len(data)))
            handler.end_headers()
            handler.wfile.write(data)
        except (BrokenPipeError, ConnectionResetError):
            pass  # the client gave up waiting (a timeout test)


def _message(model: str, tool_input: Any) -> dict[str, Any]:
    """A Messages API response whose one content block calls the `decide` tool."""
    return {
        "id": "msg_01XFDUDYJgAACzvnptvVoYEL",
        "type": "message",
        "role": "assistant",
        "model": model,
        "content": [
            {
                "type": "tool_use",
                "id": "toolu_01A09q90qw90lq917835lq9",
                "name": "decide",
                "input": tool_input,
            }
        ],
        "stop_reason": "tool_use",
        "stop_sequence": None,
        "usage": {"input_tokens": 640, "output_tokens": 41},
    }


def _error(kind: str, message: str) -> dict[str, Any]:
    return {
        "type": "error",
        "error": {"type": kind, "message": message},
        "request_id": "req_011CSHoEeqs5C35K2UUqR7Fy",
    }
