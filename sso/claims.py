"""What the gateway takes from a verified ID token's claims: who the person is (issuer and
subject), what to call them, their email only when the provider verified it, and the gateway
groups their provider groups give (OIDC_GROUPS_CLAIM, OIDC_GROUP_MAP). Every value is bounded
before it reaches a row."""

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from django.conf import settings

from sso.models import MAX_SUBJECT

MAX_USERNAME = 150  # Django's User.username
MAX_NAME = 150  # first_name, last_name
MAX_EMAIL = 254
# Provider groups read from one token, at most; each name at most Group.name's length.
MAX_GROUPS = 500
MAX_GROUP_NAME = 150
# What Django's username validator allows: letters, digits and @ . + - _
_NOT_IN_USERNAME = re.compile(r"[^\w.@+-]")


class Unusable(Exception):
    """The claims cannot sign anyone in; `detail` says why, for the person."""

    def __init__(self, detail: str) -> None:
        super().__init__(detail)
        self.detail = detail


@dataclass(frozen=True)
class Person:
    issuer: str
    subject: str
    username: str  # a new user's name; an existing user keeps theirs
    email: str  # verified by the provider, or "" (none sent)
    first_name: str
    last_name: str
    # The provider's groups as sent (bounded), None when groups are not taken from the provider.
    provider_groups: tuple[str, ...] | None


def person(claims: Mapping[str, Any]) -> Person:
    """The person a verified ID token names. Raises Unusable: no usable subject, or an email
    the provider did not mark verified (an unverified address may be anyone's)."""
    issuer, subject = claims.get("iss"), claims.get("sub")
    if not isinstance(issuer, str) or not isinstance(subject, str):
        raise Unusable("The ID token names no subject.")
    if not subject or len(subject) > MAX_SUBJECT or not subject.isascii():
        raise Unusable("The ID token's subject is not an identifier the gateway can keep.")
    email = _text(claims.get("email"), MAX_EMAIL)
    if email and not _verified(claims.get("email_verified")):
        raise Unusable(
            "Your identity provider has not verified your email address "
            "(email_verified is not true). Verify it there, then sign in again."
        )
    return Person(
        issuer=issuer,
        subject=subject,
        username=_username(claims, email, subject),
        email=email,
        first_name=_text(claims.get("given_name"), MAX_NAME),
        last_name=_text(claims.get("family_name"), MAX_NAME),
        provider_groups=_provider_groups(claims),
    )


def gateway_groups(provider_groups: Iterable[str]) -> set[str]:
    """The names of the gateway groups these provider groups give: through OIDC_GROUP_MAP when
    it is set (only the groups it names count), else each by its own name. Which of them
    exist is the caller's to check: a claim never makes a group."""
    table: dict[str, list[str]] = settings.OIDC_GROUP_MAP
    if table:
        return {name for group in provider_groups for name in table.get(group, [])}
    return set(provider_groups)


def _verified(value: Any) -> bool:
    # A boolean by the specification; some providers send the string.
    return value is True or value == "true"


def _text(value: Any, limit: int) -> str:
    return value.strip()[:limit] if isinstance(value, str) else ""


def _username(claims: Mapping[str, Any], email: str, subject: str) -> str:
    """A new user's name: the provider's preferred_username, else the email, else the subject,
    in the characters a username may hold."""
    for candidate in (_text(claims.get("preferred_username"), 1000), email, subject):
        cleaned = _NOT_IN_USERNAME.sub("_", candidate)[:MAX_USERNAME].strip("_")
        if cleaned:
            return cleaned
    return "user"


def _provider_groups(claims: Mapping[str, Any]) -> tuple[str, ...] | None:
    """The groups claim's names (a list of strings, or one string), bounded; none sent is no
    group. None when OIDC_GROUPS_CLAIM is empty (groups are kept in the admin)."""
    name = settings.OIDC_GROUPS_CLAIM
    if not name:
        return None
    value = claims.get(name)
    if isinstance(value, str):
        value = [value]
    if not isinstance(value, list):
        return ()
    names = {v.strip() for v in value[:MAX_GROUPS] if isinstance(v, str) and v.strip()}
    return tuple(sorted(n for n in names if len(n) <= MAX_GROUP_NAME))
