"""The identity provider, through authlib's OpenID Connect client.

authlib reads the provider's discovery document from the issuer, sends the person there with a
fresh `state`, `nonce` and PKCE challenge (S256) kept in their session, and on the way back
checks the state, trades the code (with the PKCE verifier and the client's secret) for the
tokens, and verifies the ID token with joserfc: its signature against the provider's published
keys (read again when a key id is new), and its issuer, audience, expiry and nonce. This module
adds what authlib leaves to its caller: the discovery document must name the configured issuer
(OpenID Connect Discovery 4.3), an answer without an ID token is refused, and the audience is
checked as well as the authorized party.
"""

import threading
import time
from dataclasses import dataclass
from typing import Any

from authlib.integrations.base_client import MismatchingStateError
from authlib.integrations.django_client import DjangoOAuth2App, OAuth
from django.conf import settings
from django.http import HttpRequest, HttpResponse
from django.urls import reverse

# The discovery document is read again after this long, so a provider's new endpoints are
# taken without a restart; its keys are read again whenever a token names a key id not known.
METADATA_SECONDS = 3600
# Clock skew allowed on the ID token's times (exp, iat), in seconds.
LEEWAY_SECONDS = 60
# What a sign-in needs from the discovery document.
ENDPOINTS = ("authorization_endpoint", "token_endpoint", "jwks_uri")


class Misconfigured(Exception):
    """The provider's discovery document does not match the settings."""


def configured() -> bool:
    return bool(settings.OIDC_ISSUER and settings.OIDC_CLIENT_ID)


def discovery_url(issuer: str) -> str:
    return issuer.rstrip("/") + "/.well-known/openid-configuration"


def callback_url() -> str:
    """The redirect URI registered at the provider: SITE_URL's, as people open the site."""
    return settings.SITE_URL.rstrip("/") + reverse("sso_callback")


_clients: dict[tuple[Any, ...], DjangoOAuth2App] = {}
_lock = threading.Lock()


def _key() -> tuple[Any, ...]:
    return (
        settings.OIDC_ISSUER,
        settings.OIDC_CLIENT_ID,
        settings.OIDC_CLIENT_SECRET,
        tuple(settings.OIDC_SCOPES),
        settings.OIDC_TIMEOUT_SECONDS,
    )


def client() -> DjangoOAuth2App:
    """authlib's client for the configured provider, one per process, made again when the
    settings change or its discovery document is older than METADATA_SECONDS."""
    key = _key()
    with _lock:
        found = _clients.get(key)
        loaded = found.server_metadata.get("_loaded_at") if found is not None else None
        if found is None or (loaded is not None and time.time() - loaded > METADATA_SECONDS):
            found = OAuth().register(
                "oidc",
                client_id=settings.OIDC_CLIENT_ID,
                client_secret=settings.OIDC_CLIENT_SECRET or None,
                server_metadata_url=discovery_url(settings.OIDC_ISSUER),
                client_kwargs={
                    "scope": " ".join(settings.OIDC_SCOPES),
                    "code_challenge_method": "S256",
                    "default_timeout": settings.OIDC_TIMEOUT_SECONDS,
                },
            )
            _clients.clear()
            _clients[key] = found
    return found


def metadata(app: DjangoOAuth2App) -> dict[str, Any]:
    """The provider's discovery document (read once, then kept); raises Misconfigured when it
    names another issuer than OIDC_ISSUER, whose tokens the gateway must not take."""
    document: dict[str, Any] = app.load_server_metadata()
    issuer = document.get("issuer")
    if not isinstance(issuer, str) or issuer.rstrip("/") != settings.OIDC_ISSUER.rstrip("/"):
        raise Misconfigured(
            f"The provider's discovery document names the issuer {str(issuer)[:200]!r}, "
            f"not OIDC_ISSUER ({settings.OIDC_ISSUER!r})."
        )
    missing = [name for name in ENDPOINTS if not isinstance(document.get(name), str)]
    if missing:
        raise Misconfigured(f"The provider's discovery document has no {', '.join(missing)}.")
    return document


def send_to_provider(request: HttpRequest) -> HttpResponse:
    """The redirect to the provider's authorization endpoint; the state, nonce and PKCE
    verifier it makes are kept in the session until the person comes back."""
    app = client()
    metadata(app)
    response: HttpResponse = app.authorize_redirect(request, callback_url())
    return response


@dataclass(frozen=True)
class SignedIn:
    """What the provider vouched for: the ID token's claims, verified, and the token itself
    (kept in the session as the end-session request's hint)."""

    claims: dict[str, Any]
    id_token: str


def come_back(request: HttpRequest) -> SignedIn:
    """Check the provider's answer on the callback and verify its ID token. Raises authlib's
    OAuthError (an error from the provider, a state not started in this session), joserfc's
    JoseError (signature, issuer, audience, expiry, nonce), Misconfigured, or requests'
    RequestException (the provider could not be reached)."""
    app = client()
    document = metadata(app)
    # An error is shown only for a sign-in this browser started: its words are the provider's,
    # and a link of anyone's making must not put words on the gateway's page.
    state = request.GET.get("state")
    if "error" in request.GET and not app.framework.get_state_data(request.session, state):
        raise MismatchingStateError()
    # Essential, and each with the one value taken: authlib checks the issuer against the
    # discovery document's but the audience only through `azp`.
    options = {
        "iss": {"essential": True, "value": document["issuer"]},
        "aud": {"essential": True, "value": settings.OIDC_CLIENT_ID},
        "sub": {"essential": True},
        "exp": {"essential": True},
        "iat": {"essential": True},
    }
    token = app.authorize_access_token(request, claims_options=options, leeway=LEEWAY_SECONDS)
    # authlib verifies an ID token only when the answer has one; an OpenID provider must
    # send it, and without it nothing says who signed in.
    if not token.get("id_token") or token.get("userinfo") is None:
        raise Misconfigured("The provider's token answer has no ID token.")
    return SignedIn(claims=dict(token["userinfo"]), id_token=token["id_token"])


def end_session_url(id_token: str) -> str | None:
    """The provider's end-session address for this ID token (RP-initiated logout), back to the
    login page after; None when the discovery document offers none."""
    app = client()
    if not metadata(app).get("end_session_endpoint"):
        return None
    back = settings.SITE_URL.rstrip("/") + reverse("login")
    made = app.create_logout_url(
        post_logout_redirect_uri=back, id_token_hint=id_token, client_id=settings.OIDC_CLIENT_ID
    )
    url: str = made["url"]
    return url
