"""Which gateway user a Slack user acts as: their SlackLink, or, with SLACK_LINK_BY_EMAIL on,
the one active gateway user whose email matches the Slack account's confirmed email exactly
(then linked for good)."""

import logging
from typing import Any

from django.conf import settings
from django.contrib.auth import get_user_model
from django.db import IntegrityError, transaction
from slack_sdk.errors import SlackApiError

from slack_approvals import client
from slack_approvals.models import SlackLink

log = logging.getLogger(__name__)


def user_for(slack_user_id: str) -> Any:
    """The active gateway user linked to this Slack user, or None."""
    link = SlackLink.objects.select_related("user").filter(slack_user_id=slack_user_id).first()
    if link is not None:
        return link.user if link.user.is_active else None
    if not settings.SLACK_LINK_BY_EMAIL:
        return None
    return _link_by_email(slack_user_id)


def _link_by_email(slack_user_id: str) -> Any:
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
        with transaction.atomic():
            SlackLink.objects.create(user=matches[0], slack_user_id=slack_user_id)
    except IntegrityError:
        return None  # the user is linked to another Slack account already
    log.info("Slack: linked %s to %s by email", slack_user_id, matches[0].get_username())
    return matches[0]
