"""A sign-in that did not succeed, in the person's words: what went wrong and what to do, on a
page of its own with a status that says whose fault it is (403: this sign-in is refused; 502:
the provider did not answer as it should). Nothing the provider sent is shown unbounded."""

import logging
from dataclasses import dataclass

from authlib.integrations.base_client import MismatchingStateError, OAuthError
from joserfc.errors import BadSignatureError, ClaimError, ExpiredTokenError, JoseError
from requests import RequestException

from sso.accounts import Deactivated
from sso.claims import Unusable
from sso.provider import Misconfigured

log = logging.getLogger(__name__)

# What the page shows of a provider's error description, at most.
MAX_DESCRIPTION = 300

AGAIN = "Start again from the login page."
TOKEN = "The identity provider's token was refused: "
CLAIMS = {
    "nonce": "it was not issued for this sign-in (its nonce does not match).",
    "aud": "it was issued for another application (its audience is not this gateway).",
    "azp": "it was issued for another application (its authorized party is not this gateway).",
    "iss": "it was issued by another provider than the one configured (its issuer).",
    "iat": "it has no time of issue.",
    "sub": "it names no subject.",
}


@dataclass(frozen=True)
class Refusal:
    status: int
    title: str
    detail: str


def explain(error: Exception) -> Refusal:
    """The refusal an error of the sign-in stands for; logged for the operators. Raises what
    it does not know (a bug is a 500, not a refusal)."""
    refusal = _refusal(error)
    log.warning("OpenID Connect sign-in refused (%s): %s", type(error).__name__, error)
    return refusal


def _refusal(error: Exception) -> Refusal:
    if isinstance(error, MismatchingStateError):
        return Refusal(
            403,
            "This sign-in was not started here",
            "The answer from the identity provider does not belong to a sign-in started in "
            "this browser, or it was used already (its state does not match). " + AGAIN,
        )
    if isinstance(error, OAuthError):
        said = (error.description or "")[:MAX_DESCRIPTION]
        return Refusal(
            403,
            "The identity provider refused the sign-in",
            f"It answered {str(error.error)[:60]!r}" + (f": {said}" if said else ".") + " " + AGAIN,
        )
    if isinstance(error, ExpiredTokenError):
        return Refusal(403, "Sign-in refused", TOKEN + "it has expired. " + AGAIN)
    if isinstance(error, BadSignatureError):
        return Refusal(
            403,
            "Sign-in refused",
            TOKEN + "its signature does not match the provider's published keys. " + AGAIN,
        )
    if isinstance(error, ClaimError):
        said = CLAIMS.get(error.claim, f"its claim {error.claim[:40]!r} is not valid.")
        return Refusal(403, "Sign-in refused", TOKEN + said + " " + AGAIN)
    if isinstance(error, JoseError):
        return Refusal(403, "Sign-in refused", TOKEN + "it could not be verified. " + AGAIN)
    if isinstance(error, Unusable):
        return Refusal(403, "Sign-in refused", error.detail)
    if isinstance(error, Deactivated):
        return Refusal(
            403,
            "This account is deactivated",
            "Your gateway account is deactivated. Ask an administrator to reactivate it.",
        )
    if isinstance(error, Misconfigured):
        return Refusal(
            502,
            "The identity provider is not set up as the gateway expects",
            f"{error} Ask an administrator to check the gateway's OIDC settings.",
        )
    if isinstance(error, RequestException):
        return Refusal(
            502,
            "The identity provider could not be reached",
            "The gateway could not reach your identity provider, or its answer could not be "
            "read. Try again in a moment; if it goes on, tell an administrator.",
        )
    raise error


# What the views catch: every error explain() turns into a refusal.
REFUSED = (
    OAuthError,
    JoseError,
    Unusable,
    Deactivated,
    Misconfigured,
    RequestException,
)
