"""Open sockets follow their credentials: a token revoked, expired or deleted, a deactivated or
deleted user, or a logout closes the sockets (and A2A streams) they opened, and no event
recorded after the revocation committed reaches them (access.clearance says how).

Each server process's hub (approvals.hub) also checks the credentials of all its sockets
together every CHECK_INTERVAL seconds, in a few queries whatever the number of sockets, so a
socket closes even when no event comes. The signals below, and access.tokens.revoke,
announce a revocation over the channel layer, when there is one, so the hubs close the user's
sockets at once rather than at the next event or check.
"""

from dataclasses import dataclass
from datetime import datetime
from functools import partial
from typing import Any

from django.contrib.auth import get_user_model, user_logged_out
from django.contrib.sessions.backends.db import SessionStore
from django.contrib.sessions.models import Session
from django.db import connection, transaction
from django.db.models import Q
from django.db.models.signals import post_delete, post_save
from django.utils import timezone

from access.models import REVOCATION_COUNTER, ApiToken, RevocationCounter
from agents.events import broadcast

CHECK_INTERVAL = 5.0  # seconds an open socket with no event to send may outlive its credentials
REVOKED = "events.revoked"  # the channel-layer message: {"type", "user", "session"}


@dataclass(frozen=True)
class Credential:
    """What a socket was opened with: the user, and their session or API token."""

    user_id: int
    session_key: str | None = None
    token_digest: str | None = None


def revocations() -> int:
    """The revocation counter (access.models.RevocationCounter): it moves in the transaction
    of every revocation. One primary-key read, in SQL written once: the hub reads it after
    every batch of events it sends, and the ORM would build the query anew each time."""
    with connection.cursor() as cursor:
        cursor.execute(_READ_COUNTER, [REVOCATION_COUNTER])
        row = cursor.fetchone()
    return row[0] if row else 0


_READ_COUNTER = "SELECT {count} FROM {table} WHERE {pk} = %s".format(
    count=connection.ops.quote_name("count"),
    table=connection.ops.quote_name(RevocationCounter._meta.db_table),
    pk=connection.ops.quote_name(RevocationCounter._meta.pk.column),
)


def still_valid(credentials: list[Credential]) -> dict[Credential, datetime | None]:
    """Those of `credentials` that still hold, each with when it lapses (its token's or its
    session's expiry; None: never by itself): the user exists and is active, and the session
    still exists, unexpired and logged in as that user, or the token still exists, unrevoked
    and unexpired. Sessions are read from the database session store (the project's
    SESSION_ENGINE)."""
    if not credentials:
        return {}
    now = timezone.now()
    active = set(
        get_user_model()
        .objects.filter(pk__in={c.user_id for c in credentials}, is_active=True)
        .values_list("pk", flat=True)
    )
    keys = {c.session_key for c in credentials if c.session_key}
    sessions: dict[str, tuple[str | None, datetime]] = {}
    if keys:
        store = SessionStore()
        rows = Session.objects.filter(session_key__in=keys, expire_date__gt=now)
        for key, data, expires in rows.values_list("session_key", "session_data", "expire_date"):
            sessions[key] = (store.decode(data).get("_auth_user_id"), expires)
    digests = {c.token_digest for c in credentials if c.token_digest}
    usable = ApiToken.objects.filter(digest__in=digests, revoked_at__isnull=True).filter(
        Q(expires_at__isnull=True) | Q(expires_at__gt=now)
    )
    tokens = {
        digest: (user_id, expires)
        for digest, user_id, expires in (
            usable.values_list("digest", "user_id", "expires_at") if digests else []
        )
    }
    valid: dict[Credential, datetime | None] = {}
    for c in credentials:
        if c.user_id not in active:
            continue
        lapses = []
        if c.session_key is not None:
            user, expires = sessions.get(c.session_key, (None, None))
            if user != str(c.user_id):
                continue
            lapses.append(expires)
        if c.token_digest is not None:
            user, expires = tokens.get(c.token_digest, (None, None))
            if user != c.user_id:
                continue
            if expires is not None:
                lapses.append(expires)
        valid[c] = min(lapses, default=None)
    return valid


def announce(user_id: int, session_key: str | None = None) -> None:
    """Tell every hub, once the change commits, to check this user's sockets now (and to close
    those of `session_key` without asking: a logout deletes the session only after its signal)."""
    message = {"type": REVOKED, "user": user_id, "session": session_key}
    transaction.on_commit(partial(broadcast, message), robust=True)


def _token_deleted(sender: Any, instance: ApiToken, **kwargs: Any) -> None:
    announce(instance.user_id)


def _user_saved(sender: Any, instance: Any, **kwargs: Any) -> None:
    if not instance.is_active:
        announce(instance.pk)


def _user_deleted(sender: Any, instance: Any, **kwargs: Any) -> None:
    announce(instance.pk)


def _logged_out(sender: Any, request: Any, user: Any, **kwargs: Any) -> None:
    if user is not None:
        announce(user.pk, getattr(request.session, "session_key", None))


def connect_signals() -> None:
    """Called by approvals.apps once the models are ready."""
    user_model = get_user_model()
    post_delete.connect(_token_deleted, sender=ApiToken, dispatch_uid="revoke-token")
    post_save.connect(_user_saved, sender=user_model, dispatch_uid="revoke-inactive-user")
    post_delete.connect(_user_deleted, sender=user_model, dispatch_uid="revoke-deleted-user")
    user_logged_out.connect(_logged_out, dispatch_uid="revoke-logged-out")
