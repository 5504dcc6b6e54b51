"""A push service stand-in the tests start: an HTTP server that takes a push as a browser's
push service does (RFC 8030), checks its VAPID authorization (RFC 8292: an ES256 JWT whose
`aud` is this service's origin, unexpired, with a `sub`, signed by the key it names) and
decrypts its aes128gcm payload (RFC 8291) with the subscription's private keys, which only
the "browser" (the test's `Subscription`) holds. Answers 201, or the status a test sets for a
subscription (410: gone)."""

import base64
import http.server
import json
import os
import threading
import time
from dataclasses import dataclass, field
from typing import Any

import http_ece
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.hazmat.primitives.serialization import Encoding, PublicFormat
from joserfc import jwt
from joserfc.jwk import ECKey


def b64(raw: bytes) -> str:
    return base64.urlsafe_b64encode(raw).rstrip(b"=").decode()


def unb64(text: str) -> bytes:
    return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))


@dataclass
class Subscription:
    """What a browser keeps for one push subscription: the endpoint and its private keys."""

    endpoint: str
    private: ec.EllipticCurvePrivateKey = field(
        default_factory=lambda: ec.generate_private_key(ec.SECP256R1())
    )
    auth: bytes = field(default_factory=lambda: os.urandom(16))

    def info(self) -> dict[str, Any]:
        """PushSubscription.toJSON(), as the browser sends it."""
        point = self.private.public_key().public_bytes(
            Encoding.X962, PublicFormat.UncompressedPoint
        )
        return {
            "endpoint": self.endpoint,
            "expirationTime": None,
            "keys": {"p256dh": b64(point), "auth": b64(self.auth)},
        }


@dataclass
class Received:
    """One push the service took: whose, the decrypted payload, the VAPID claims and key,
    and the headers the sender set."""

    subscription: str
    payload: dict[str, Any]
    plaintext: str
    claims: dict[str, Any]
    vapid_key: str
    headers: dict[str, str]


class PushService:
    def __init__(self) -> None:
        self.subscriptions: dict[str, Subscription] = {}
        self.answers: dict[str, int] = {}  # subscription id -> the status it answers
        self.received: list[Received] = []
        self.refused: list[str] = []
        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), self._handler())
        self.origin = f"http://127.0.0.1:{self.server.server_address[1]}"
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    def start(self) -> "PushService":
        self.thread.start()
        return self

    def stop(self) -> None:
        self.server.shutdown()
        self.server.server_close()

    def subscribe(self, name: str) -> Subscription:
        made = Subscription(f"{self.origin}/push/{name}")
        self.subscriptions[name] = made
        return made

    def to(self, name: str) -> list[Received]:
        return [r for r in self.received if r.subscription == name]

    def take(self, name: str, body: bytes, headers: Any) -> int:
        """Check and keep one push; the status to answer."""
        subscription = self.subscriptions.get(name)
        if subscription is None:
            return 404
        scheme, _, params = (headers.get("Authorization") or "").partition(" ")
        fields = dict(p.split("=", 1) for p in params.split(",") if "=" in p)
        if scheme != "vapid" or "t" not in fields or "k" not in fields:
            self.refused.append("no VAPID authorization")
            return 401
        point = unb64(fields["k"])
        key = ECKey.import_key(
            {"kty": "EC", "crv": "P-256", "x": b64(point[1:33]), "y": b64(point[33:65])}
        )
        try:
            token = jwt.decode(fields["t"], key, algorithms=["ES256"])
            jwt.JWTClaimsRegistry(
                aud={"essential": True, "value": self.origin},
                exp={"essential": True},
                sub={"essential": True},
            ).validate(token.claims)
        except Exception as e:
            self.refused.append(f"VAPID: {type(e).__name__}: {e}")
            return 403
        if token.claims["exp"] > time.time() + 24 * 3600:
            self.refused.append("VAPID: exp more than 24 hours ahead")
            return 403
        if headers.get("Content-Encoding") != "aes128gcm":
            self.refused.append("not aes128gcm")
            return 400
        plaintext = http_ece.decrypt(
            body,
            private_key=subscription.private,
            auth_secret=subscription.auth,
            version="aes128gcm",
        ).decode()
        self.received.append(
            Received(
                subscription=name,
                payload=json.loads(plaintext),
                plaintext=plaintext,
                claims=dict(token.claims),
                vapid_key=fields["k"],
                headers={k.lower(): v for k, v in headers.items()},
            )
        )
        return self.answers.get(name, 201)

    def _handler(self) -> type[http.server.BaseHTTPRequestHandler]:
        service = self

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
                name = self.path.removeprefix("/push/")
                status = service.take(name, body, self.headers)
                self.send_response(status)
                self.send_header("Content-Length", "0")
                self.end_headers()

            def log_message(self, format: str, *args: Any) -> None:
                pass

        return Handler
