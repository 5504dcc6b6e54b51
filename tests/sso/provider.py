"""A local OpenID provider the tests start in a thread, answering the real payloads: discovery,
the keys (JWKS), an authorization endpoint with a tiny sign-in page that sends the browser back
with a code, a token endpoint that checks the client's secret and the PKCE verifier and signs
its ID tokens (RS256, with an RSA key it makes, through joserfc), and an end-session endpoint.

A test changes what the next ID token says (`tamper`), signs it with a key nobody published
(`forge`), or takes the end-session endpoint out of the discovery document (`end_session`).
"""

import base64
import hashlib
import html
import json
import secrets
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qsl, urlencode, urlsplit

import httpx
from joserfc import jwt
from joserfc.jwk import RSAKey

CLIENT_ID = "gateway"
CLIENT_SECRET = "stand-in-secret-1"
KEY_ID = "stand-in-1"


class Provider:
    def __init__(self) -> None:
        self.key = RSAKey.generate_key(2048, parameters={"kid": KEY_ID, "use": "sig"})
        # Same key id, never published: what a forger would sign with.
        self.forger = RSAKey.generate_key(2048, parameters={"kid": KEY_ID, "use": "sig"})
        self.people: dict[str, dict[str, Any]] = {}  # sign-in name -> the person's claims
        self.codes: dict[str, dict[str, Any]] = {}
        self.tamper: dict[str, Any] = {}  # claims the next ID tokens carry instead
        self.forge = False
        self.end_session = True
        self.logouts: list[dict[str, str]] = []
        self.server = ThreadingHTTPServer(("127.0.0.1", 0), _Handler)
        self.server.provider = self  # type: ignore[attr-defined]
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    def start(self) -> "Provider":
        self.thread.start()
        return self

    def stop(self) -> None:
        self.server.shutdown()
        self.server.server_close()

    def add(self, login: str, **claims: Any) -> None:
        """A person who signs in as `login`; their claims (sub, email, groups, ...)."""
        self.people[login] = {"sub": f"sub-{login}", "preferred_username": login, **claims}

    # What the provider answers ---------------------------------------------------------

    def discovery(self) -> dict[str, Any]:
        document = {
            "issuer": self.url,
            "authorization_endpoint": f"{self.url}/authorize",
            "token_endpoint": f"{self.url}/token",
            "jwks_uri": f"{self.url}/jwks",
            "response_types_supported": ["code"],
            "subject_types_supported": ["public"],
            "id_token_signing_alg_values_supported": ["RS256"],
            "code_challenge_methods_supported": ["S256"],
            "token_endpoint_auth_methods_supported": ["client_secret_basic"],
            "scopes_supported": ["openid", "email", "profile"],
        }
        if self.end_session:
            document["end_session_endpoint"] = f"{self.url}/logout"
        return document

    def jwks(self) -> dict[str, Any]:
        return {"keys": [self.key.as_dict(private=False)]}

    def issue_code(self, form: dict[str, str]) -> str:
        """The code for an approved sign-in; raises KeyError for an unknown person."""
        person = self.people[form["login"]]
        code = secrets.token_urlsafe(24)
        self.codes[code] = {
            "person": person,
            "nonce": form.get("nonce"),
            "client_id": form["client_id"],
            "redirect_uri": form["redirect_uri"],
            "challenge": form["code_challenge"],
        }
        return code

    def token(self, form: dict[str, str], authorization: str) -> tuple[int, dict[str, Any]]:
        """The token endpoint's answer: (status, body)."""
        scheme, _, raw = authorization.partition(" ")
        client = base64.b64decode(raw).decode() if scheme == "Basic" else ""
        if client != f"{CLIENT_ID}:{CLIENT_SECRET}":
            return 401, {"error": "invalid_client"}
        grant = self.codes.pop(form.get("code", ""), None)
        if form.get("grant_type") != "authorization_code" or grant is None:
            return 400, {"error": "invalid_grant", "error_description": "unknown code"}
        verifier = form.get("code_verifier", "")
        digest = hashlib.sha256(verifier.encode()).digest()
        challenge = base64.urlsafe_b64encode(digest).rstrip(b"=").decode()
        if challenge != grant["challenge"] or form.get("redirect_uri") != grant["redirect_uri"]:
            return 400, {"error": "invalid_grant", "error_description": "PKCE or redirect_uri"}
        now = int(time.time())
        claims = {
            "iss": self.url,
            "aud": CLIENT_ID,
            "iat": now,
            "exp": now + 300,
            "nonce": grant["nonce"],
            **grant["person"],
            **self.tamper,
        }
        key = self.forger if self.forge else self.key
        id_token = jwt.encode({"alg": "RS256", "kid": KEY_ID}, claims, key)
        access = secrets.token_urlsafe(24)
        return 200, {
            "access_token": access,
            "token_type": "Bearer",
            "expires_in": 300,
            "id_token": id_token,
        }

    # What a test does where a browser would ------------------------------------------

    def approve(self, authorize_url: str, login: str) -> str:
        """Sign in at the provider as `login`, as its page's form does; the address the
        provider sends the browser back to (the gateway's callback, with code and state)."""
        query = dict(parse_qsl(urlsplit(authorize_url).query))
        answer = httpx.post(f"{self.url}/authorize", data={**query, "login": login})
        assert answer.status_code == 302, answer.text
        return answer.headers["Location"]


SIGN_IN_PAGE = """<!doctype html><html lang="en"><head><meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>Stand-in ID</title></head>
<body><h1>Stand-in ID</h1><form method="post" action="/authorize">{hidden}
<label>Username <input name="login" autocomplete="username"></label>
<button type="submit">Sign in</button></form></body></html>"""


class _Handler(BaseHTTPRequestHandler):
    server: Any

    def log_message(self, format: str, *args: Any) -> None:
        pass

    @property
    def provider(self) -> Provider:
        return self.server.provider

    def _json(self, status: int, body: dict[str, Any]) -> None:
        data = json.dumps(body).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def _redirect(self, location: str) -> None:
        self.send_response(302)
        self.send_header("Location", location)
        self.send_header("Content-Length", "0")
        self.end_headers()

    def _html(self, text: str) -> None:
        data = text.encode()
        self.send_response(200)
        self.send_header("Content-Type", "text/html; charset=utf-8")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def _form(self) -> dict[str, str]:
        length = int(self.headers.get("Content-Length") or 0)
        return dict(parse_qsl(self.rfile.read(length).decode()))

    def do_GET(self) -> None:
        parts = urlsplit(self.path)
        query = dict(parse_qsl(parts.query))
        if parts.path == "/.well-known/openid-configuration":
            self._json(200, self.provider.discovery())
        elif parts.path == "/jwks":
            self._json(200, self.provider.jwks())
        elif parts.path == "/authorize":
            ok = (
                query.get("response_type") == "code"
                and query.get("client_id") == CLIENT_ID
                and query.get("code_challenge_method") == "S256"
                and "openid" in query.get("scope", "").split()
            )
            if not ok:
                self._json(400, {"error": "invalid_request"})
                return
            hidden = "".join(
                f'<input type="hidden" name="{html.escape(k)}" value="{html.escape(v)}">'
                for k, v in query.items()
            )
            self._html(SIGN_IN_PAGE.format(hidden=hidden))
        elif parts.path == "/logout":
            self.provider.logouts.append(query)
            if query.get("post_logout_redirect_uri"):
                self._redirect(query["post_logout_redirect_uri"])
            else:
                self._html("<!doctype html><title>Signed out</title><p>Signed out.</p>")
        else:
            self._json(404, {"error": "not_found"})

    def do_POST(self) -> None:
        form = self._form()
        if self.path == "/authorize":
            try:
                code = self.provider.issue_code(form)
            except KeyError:
                self._html("<!doctype html><title>Unknown</title><p>No such person.</p>")
                return
            back = {"code": code, "state": form.get("state", "")}
            self._redirect(f"{form['redirect_uri']}?{urlencode(back)}")
        elif self.path == "/token":
            status, body = self.provider.token(form, self.headers.get("Authorization", ""))
            self._json(status, body)
        else:
            self._json(404, {"error": "not_found"})
