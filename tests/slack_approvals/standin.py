"""A small local stand-in for Slack's Web API: the methods the gateway calls, answered with
Slack's own response shapes, every call recorded for the tests to read.

Slack cannot be reached from the test machines, so the gateway's real client (slack_sdk's
WebClient) is pointed here by SLACK_API_URL. The stand-in keeps the messages it was sent, so a
test can read a message as Slack would show it after its updates, and it can be told to fail
the next calls: an HTTP 500, or Slack's rate limit (429, `{"ok": false, "error": "ratelimited"}`
and a Retry-After header).
"""

import json
import threading
import time
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qsl, urlsplit


@dataclass
class Call:
    """One request the stand-in answered: the Web API method, its arguments (JSON body, form
    body and query string together) and the Authorization header it came with."""

    method: str
    body: dict[str, Any]
    authorization: str


@dataclass
class Failure:
    status: int
    error: str
    retry_after: int = 0


@dataclass
class SlackStandIn:
    """The server, started on a free port of 127.0.0.1 (or `port`), in a thread."""

    port: int = 0
    calls: list[Call] = field(default_factory=list)
    # (channel, ts) -> the message as it stands: text, blocks, ts, channel.
    messages: dict[tuple[str, str], dict[str, Any]] = field(default_factory=dict)
    # (channel, the message's ts) -> the replies in its thread, in order
    replies: dict[tuple[str, str], list[dict[str, Any]]] = field(default_factory=dict)
    # Slack user id -> users.info's `user` object.
    users: dict[str, dict[str, Any]] = field(default_factory=dict)
    failures: list[Failure] = field(default_factory=list)
    views: list[dict[str, Any]] = field(default_factory=list)  # the modals opened
    _server: ThreadingHTTPServer | None = None
    _lock: threading.Lock = field(default_factory=threading.Lock)
    _clock: int = 0

    @property
    def url(self) -> str:
        """The Web API's base URL, for SLACK_API_URL."""
        assert self._server is not None
        return f"http://127.0.0.1:{self._server.server_address[1]}/api/"

    def start(self) -> "SlackStandIn":
        standin = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                standin._handle(self)

            def do_GET(self) -> None:
                standin._handle(self)

            def log_message(self, *args: Any) -> None:
                pass

        self._server = ThreadingHTTPServer(("127.0.0.1", self.port), Handler)
        threading.Thread(target=self._server.serve_forever, daemon=True).start()
        return self

    def stop(self) -> None:
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()

    def fail_next(self, times: int = 1, status: int = 500, error: str = "internal_error") -> None:
        """The next `times` calls answer HTTP `status` with `{"ok": false, "error": error}`."""
        self.failures += [Failure(status, error) for _ in range(times)]

    def rate_limit_next(self, times: int = 1, retry_after: int = 1) -> None:
        """The next `times` calls are refused as Slack refuses a caller over its rate limit."""
        self.failures += [Failure(429, "ratelimited", retry_after) for _ in range(times)]

    def add_user(self, user_id: str, name: str, email: str = "", confirmed: bool = True) -> None:
        """A member of the workspace, as users.info describes one."""
        self.users[user_id] = {
            "id": user_id,
            "name": name,
            "real_name": name.title(),
            "profile": {"email": email, "display_name": name},
            "is_bot": False,
            "is_email_confirmed": confirmed,
        }

    def called(self, method: str) -> list[Call]:
        return [c for c in self.calls if c.method == method]

    def message(self, channel: str, ts: str) -> dict[str, Any]:
        return self.messages[(channel, ts)]

    # The serving side.

    def _handle(self, request: BaseHTTPRequestHandler) -> None:
        parts = urlsplit(request.path)
        method = parts.path.rsplit("/", 1)[-1]
        length = int(request.headers.get("Content-Length") or 0)
        raw = request.rfile.read(length) if length else b""
        body: dict[str, Any] = dict(parse_qsl(parts.query))
        if "json" in (request.headers.get("Content-Type") or ""):
            body.update(json.loads(raw or b"{}"))
        elif raw:
            body.update(parse_qsl(raw.decode()))
        with self._lock:
            self.calls.append(Call(method, body, request.headers.get("Authorization") or ""))
            failure = self.failures.pop(0) if self.failures else None
            status, answer = (
                (failure.status, {"ok": False, "error": failure.error})
                if failure
                else self._answer(method, body)
            )
        data = json.dumps(answer).encode()
        request.send_response(status)
        request.send_header("Content-Type", "application/json; charset=utf-8")
        request.send_header("Content-Length", str(len(data)))
        if failure and failure.retry_after:
            request.send_header("Retry-After", str(failure.retry_after))
        request.end_headers()
        request.wfile.write(data)

    def _ts(self) -> str:
        self._clock += 1
        return f"{int(time.time())}.{self._clock:06d}"

    def _answer(self, method: str, body: dict[str, Any]) -> tuple[int, dict[str, Any]]:
        blocks = body.get("blocks")
        if isinstance(blocks, str):  # a form body carries them as JSON text
            blocks = json.loads(blocks)
        if method == "auth.test":
            return 200, {
                "ok": True,
                "url": "https://standin.slack.com/",
                "team": "Stand-in",
                "user": "gateway",
                "team_id": "T0STANDIN",
                "user_id": "U0GATEWAY",
                "bot_id": "B0GATEWAY",
            }
        if method == "chat.postMessage":
            channel, ts = body.get("channel", ""), self._ts()
            if not channel:
                return 200, {"ok": False, "error": "channel_not_found"}
            message = {"type": "message", "text": body.get("text", ""), "blocks": blocks, "ts": ts}
            parent = body.get("thread_ts")
            if parent:  # a reply, in the thread of a message of the channel's
                if (channel, parent) not in self.messages:
                    return 200, {"ok": False, "error": "thread_not_found"}
                self.replies.setdefault((channel, parent), []).append(message)
                return 200, {"ok": True, "channel": channel, "ts": ts, "message": message}
            self.messages[(channel, ts)] = {**message, "channel": channel}
            return 200, {"ok": True, "channel": channel, "ts": ts, "message": message}
        if method == "chat.update":
            key = (body.get("channel", ""), body.get("ts", ""))
            if key not in self.messages:
                return 200, {"ok": False, "error": "message_not_found"}
            self.messages[key].update(text=body.get("text", ""), blocks=blocks)
            message = {k: v for k, v in self.messages[key].items() if k != "channel"}
            return 200, {
                "ok": True,
                "channel": key[0],
                "ts": key[1],
                "text": body.get("text", ""),
                "message": message,
            }
        if method == "chat.postEphemeral":
            return 200, {"ok": True, "message_ts": self._ts()}
        if method == "views.open":
            view = body.get("view")
            if isinstance(view, str):
                view = json.loads(view)
            self.views.append(view)
            return 200, {"ok": True, "view": {"id": f"V{len(self.views):08d}", **view}}
        if method == "conversations.open":
            user = str(body.get("users", "")).split(",")[0]
            if not user:
                return 200, {"ok": False, "error": "users_list_not_supplied"}
            return 200, {"ok": True, "channel": {"id": f"D{user.removeprefix('U')}"}}
        if method == "users.info":
            user = self.users.get(body.get("user", ""))
            if user is None:
                return 200, {"ok": False, "error": "user_not_found"}
            return 200, {"ok": True, "user": user}
        return 404, {"ok": False, "error": "unknown_method"}
