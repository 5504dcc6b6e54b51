"""Open sockets follow their credentials: a token revoked, expired or deleted, a deactivated or
deleted user, or a logout closes the sockets (and A2A streams) they opened.

Each server process's hub (approvals.hub) checks the credentials of all its sockets together
every CHECK_INTERVAL seconds, in a few queries whatever the number of sockets: a token that
expires is caught by the next check. The signals below, and approvals.tokens.revoke, also
announce a revocation over the channel layer, when there is one, so the hubs check the user's
sockets at once.
"""

from dataclasses import dataclass
from functools import partial
from typing import Any

from django.contrib.auth import get_user_model, user_logged_out
from django.contrib.sessions.backends.db import SessionStore
from django.contrib.sessions.models import Session
from django.db import transaction
from django.db.models import Q
from django.db.models.signals import post_delete, post_save
from django.utils import timezone

from agents.events import broadcast
from approvals.models import ApiToken

CHECK_INTERVAL = 5.0  # seconds an open socket may outlive its credentials with no announcement
REVOKED = "events.revoked"  # the channel-layer message: {"type", "user", "session"}


@dataclass(frozen=True)
class Credential:
    """What a socket was opened with: the user, and their session or API token."""

    user_id: int
    session_key: str | None = None
    token_digest: str | None = None


def still_valid(credentials: list[Credential]) -> set[Credential]:
    """Those of `credentials` that still hold: the user exists and is active, and the session
    still exists, unexpired and logged in as that user, or the token still exists, unrevoked
    and unexpired. Sessions are read from the database session store (the project's
    SESSION_ENGINE)."""
    if not credentials:
        return set()
    active = set(
        get_user_model()
        .objects.filter(pk__in={c.user_id for c in credentials}, is_active=True)
        .values_list("pk", flat=True)
    )
    keys = {c.session_key for c in credentials if c.session_key}
    logged_in: dict[str, str | None] = {}
    if keys:
        store = SessionStore()
        rows = Session.objects.filter(session_key__in=keys, expire_date__gt=timezone.now())
        for key, data in rows.values_list("session_key", "session_data"):
            logged_in[key] = store.decode(data).get("_auth_user_id")
    digests = {c.token_digest for c in credentials if c.token_digest}
    usable = ApiToken.objects.filter(digest__in=digests, revoked_at__isnull=True).filter(
        Q(expires_at__isnull=True) | Q(expires_at__gt=timezone.now())
    )
    tokens = dict(usable.values_list("digest", "user_id") if digests else [])
    return {
        c
        for c in credentials
        if c.user_id in active
        and (c.session_key is None or logged_in.get(c.session_key) == str(c.user_id))
        and (c.token_digest is None or tokens.get(c.token_digest) == c.user_id)
    }


def announce(user_id: Any, session_key: str | None = None) -> None:
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
