"""Making and revoking API tokens: each change is one transaction with its audit event
(TOKEN_CREATED, TOKEN_REVOKED), which names the token by id, prefix and name, never by value."""

import re
from datetime import UTC, datetime, timedelta
from typing import Any

from django.db import transaction
from django.utils import timezone
from django.utils.dateparse import parse_date, parse_datetime

from access.models import ALL_SCOPES, ApiToken
from access.revocation import announce
from agents import events
from agents.models import Event

DURATION = re.compile(r"^(\d+)([mhdw])$")
UNITS = {"m": "minutes", "h": "hours", "d": "days", "w": "weeks"}


def parse_expiry(text: str, now: datetime | None = None) -> datetime:
    """When a token given `--expires TEXT` expires: a duration from now (`90m`, `12h`, `30d`,
    `2w`), an ISO date (`2027-01-31`: at its start, 00:00 UTC) or an ISO date and time
    (`2027-01-31T18:00:00+01:00`; UTC when no offset is given). It must be in the future."""
    now = now or timezone.now()
    text = text.strip()
    if found := DURATION.match(text):
        amount, unit = int(found[1]), UNITS[found[2]]
        if amount <= 0:
            raise ValueError("A duration longer than zero.")
        return now + timedelta(**{unit: amount})
    try:
        moment = parse_datetime(text)
        day = parse_date(text) if moment is None else None
    except ValueError:
        moment = day = None
    if day is not None:
        moment = datetime(day.year, day.month, day.day, tzinfo=UTC)
    if moment is None:
        raise ValueError(
            f"{text!r} is neither a duration (90m, 12h, 30d, 2w) nor an ISO date or date and time."
        )
    if timezone.is_naive(moment):
        moment = moment.replace(tzinfo=UTC)
    if moment <= now:
        raise ValueError(f"{moment.isoformat()} has already passed.")
    return moment


def audit_payload(token: ApiToken, via: str) -> dict[str, Any]:
    return {
        "token": token.pk,
        "prefix": token.prefix,
        "name": token.name,
        "user": token.user.username,
        "scopes": list(token.scopes),
        "expires_at": token.expires_at.isoformat() if token.expires_at else None,
        "via": via,
    }


def create(
    user: Any,
    name: str = "",
    scopes: list[str] | None = None,
    expires_at: datetime | None = None,
    actor: Any = None,
    via: str = "command",
) -> tuple[ApiToken, str]:
    """A new token for `user` (every scope unless `scopes` names some), and its raw value,
    which is not stored and is shown only now."""
    unknown = set(scopes or ()) - set(ALL_SCOPES)
    if unknown:
        raise ValueError(f"Unknown scopes: {', '.join(sorted(unknown))}.")
    with transaction.atomic():
        token, raw = ApiToken.issue(user, name, scopes, expires_at)
        events.record(Event.Type.TOKEN_CREATED, actor=actor, payload=audit_payload(token, via))
    return token, raw


def revoke(token: ApiToken, actor: Any = None, via: str = "command") -> bool:
    """Revoke the token (the row stays, with when and by whom); False if it already was. Its
    next request is refused (401), and its open sockets and streams close within seconds."""
    now = timezone.now()
    with transaction.atomic():
        done = ApiToken.objects.filter(pk=token.pk, revoked_at__isnull=True).update(
            revoked_at=now, revoked_by=actor
        )
        if not done:
            return False
        token.refresh_from_db()
        payload = {**audit_payload(token, via), "revoked_at": now.isoformat()}
        events.record(Event.Type.TOKEN_REVOKED, actor=actor, payload=payload)
        # The sockets it opened are checked at once (access.revocation).
        announce(token.user_id)
    return True
