"""Which gateway user a Slack user acts as: their SlackLink, or, with SLACK_LINK_BY_EMAIL on,
the one active gateway user whose email matches the Slack account's confirmed email exactly
(then linked for good). Making and removing a link is audited here (SLACK_LINKED,
SLACK_UNLINKED), whichever way it came: the Connect step (slack_approvals.connect), the
reviewer's own page, an email, or an admin (slack_approvals.admin)."""

import logging
from typing import Any

from django.conf import settings
from django.contrib.auth import get_user_model
from django.db import IntegrityError, transaction
from django.db.models import TextChoices

from agents import events
from slack_approvals import client
from slack_approvals.models import SlackLink

log = logging.getLogger(__name__)


class Notice(TextChoices):
    """The Event types this module records (agents.models.Event.type holds any string)."""

    LINKED = "SLACK_LINKED"
    UNLINKED = "SLACK_UNLINKED"


def user_for(slack_user_id: str) -> Any:
    """The active gateway user linked to this Slack user, or None."""
    link = SlackLink.objects.select_related("user").filter(slack_user_id=slack_user_id).first()
    if link is not None:
        return link.user if link.user.is_active else None
    if not settings.SLACK_LINK_BY_EMAIL:
        return None
    return _link_by_email(slack_user_id)


def _link_by_email(slack_user_id: str) -> Any:
    from slack_sdk.errors import SlackApiError  # here: slack_approvals.client says why

    try:
        answer = client.web_client(client.CLICK_TIMEOUT).users_info(user=slack_user_id)
    except (SlackApiError, OSError) as e:
        log.warning("Slack: could not read user %s to link by email: %s", slack_user_id, e)
        return None
    profile = answer["user"].get("profile") or {}
    email = profile.get("email") or ""
    if not email or not answer["user"].get("is_email_confirmed"):
        return None
    matches = list(get_user_model().objects.filter(email__iexact=email, is_active=True)[:2])
    if len(matches) != 1 or matches[0].email != email:
        return None  # none, several, or not exactly the same address: no guess
    try:
        link(matches[0], slack_user_id, via="email")
    except IntegrityError:
        return None  # the user is linked to another Slack account already
    log.info("Slack: linked %s to %s by email", slack_user_id, matches[0].get_username())
    return matches[0]


def link(user: Any, slack_user_id: str, via: str, actor: Any = None) -> SlackLink:
    """Link `user` to the Slack account, with its audit event (by `actor`, else the user), in
    one transaction; raises IntegrityError when either is linked already (SlackLink's unique
    columns say so)."""
    with transaction.atomic():
        made = SlackLink.objects.create(user=user, slack_user_id=slack_user_id)
        payload = _audit(user, slack_user_id, via)
        events.record(Notice.LINKED, actor=actor or user, payload=payload)
    return made


def unlink(user: Any, via: str, actor: Any = None) -> bool:
    """Remove `user`'s link, with its audit event (by `actor`, else the user); False when
    there was none."""
    with transaction.atomic():
        found = SlackLink.objects.select_for_update().filter(user=user).first()
        if found is None:
            return False
        found.delete()
        payload = _audit(user, found.slack_user_id, via)
        events.record(Notice.UNLINKED, actor=actor or user, payload=payload)
    return True


def _audit(user: Any, slack_user_id: str, via: str) -> dict[str, str]:
    return {"user": user.get_username(), "slack_user_id": slack_user_id, "via": via}
