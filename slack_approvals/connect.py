"""The "Connect Slack" step: a reviewer links their own Slack account, proving both sides.

The gateway side: a logged-in reviewer gives their Slack member id on the Slack page
(slack_approvals.views), and `ask` has the bot send that Slack user a direct message whose
button carries a one-time token (random; only its SHA-256 is stored, in a SlackLinkRequest
that expires after LINK_MINUTES). The Slack side: the button's click comes to
/slack/interactions signed by Slack, and `confirm` links the two only when the clicker is the
Slack user the token was sent to and the token is unused and unexpired. A click that fails
any of these changes nothing; its refusal goes back to the clicker alone.
"""

import hashlib
import logging
import re
import secrets
from datetime import timedelta
from typing import Any

from django.db import IntegrityError, transaction
from django.utils import timezone
from slack_sdk.errors import SlackApiError

from access import ratelimits
from slack_approvals import client, links
from slack_approvals.message import escaped
from slack_approvals.models import SlackLink, SlackLinkRequest

log = logging.getLogger(__name__)

CONFIRM = "confirm_link"  # the button's action_id (slack_approvals.interactions)
LINK_MINUTES = 15
# A member id as Slack shows it (profile → ⋮ → Copy member ID): U…, or W… in an Enterprise Grid.
MEMBER_ID = re.compile(r"^[UW][A-Z0-9]{2,40}$")
# Requests kept after they expire, so a late click is told the same as any used one; older
# ones are removed whenever someone asks again.
KEEP_EXPIRED = timedelta(days=1)

BAD_ID = (
    "A Slack member ID looks like U012AB3CD (or W012AB3CD): in Slack, open your profile, "
    "then ⋮ → Copy member ID."
)
LINKED_ALREADY = "Your account is linked to a Slack account already: unlink it first."
TAKEN = "That Slack account is linked to another gateway user."
UNUSABLE = (
    "This link request is unknown, used or expired, so this click changed nothing. "
    "Ask again from the gateway's Slack page."
)
NOT_YOURS = "This link request was made for another Slack account, so this click changed nothing."
YOURS_TAKEN = (
    "The gateway user who asked is linked to another Slack account already, so this click "
    "changed nothing."
)


class Refused(Exception):
    """The Connect step cannot go on: `detail` says why, in words for the page; `status` is the
    page's HTTP status."""

    def __init__(self, detail: str, status: int = 400) -> None:
        super().__init__(detail)
        self.detail = detail
        self.status = status


def digest(token: str) -> str:
    return hashlib.sha256(token.encode()).hexdigest()


def pending(user: Any) -> SlackLinkRequest | None:
    """The user's latest request still waiting for its click, if any."""
    waiting = SlackLinkRequest.objects.filter(
        user=user, used_at__isnull=True, expires_at__gt=timezone.now()
    )
    return waiting.order_by("-created_at", "-pk").first()


def ask(user: Any, member_id: str) -> SlackLinkRequest:
    """Send `member_id` the direct message that asks to link them to `user`; raises Refused for
    an id of the wrong shape, an account already linked, the rate limit, or a Slack that did
    not take the message. A new request replaces the user's earlier ones."""
    member_id = member_id.strip().upper()
    if not MEMBER_ID.match(member_id):
        raise Refused(BAD_ID)
    if SlackLink.objects.filter(user=user).exists():
        raise Refused(LINKED_ALREADY, 409)
    if SlackLink.objects.filter(slack_user_id=member_id).exists():
        raise Refused(TAKEN, 409)
    try:
        ratelimits.hit(ratelimits.SLACK_CONNECT, user)
    except ratelimits.Limited as e:
        raise Refused(e.detail, 429) from e
    token = secrets.token_urlsafe(32)
    now = timezone.now()
    # Committed before the message goes out, so that its click finds it.
    with transaction.atomic():
        SlackLinkRequest.objects.filter(user=user).delete()
        SlackLinkRequest.objects.filter(expires_at__lt=now - KEEP_EXPIRED).delete()
        request = SlackLinkRequest.objects.create(
            user=user,
            slack_user_id=member_id,
            token_hash=digest(token),
            expires_at=now + timedelta(minutes=LINK_MINUTES),
        )
    text, blocks = question(user, token)
    try:
        answer = client.web_client().chat_postMessage(channel=member_id, text=text, blocks=blocks)
    except (SlackApiError, OSError) as e:
        request.delete()
        error = e.response.get("error") if isinstance(e, SlackApiError) else None
        log.warning("Slack: could not send %s the link message: %s", member_id, e)
        if error in ("user_not_found", "channel_not_found"):
            raise Refused("Slack has no member with that ID in this workspace.") from e
        raise Refused(f"Slack did not take the message ({error or 'unreachable'}).", 502) from e
    request.channel = str(answer.get("channel") or member_id)
    request.ts = str(answer.get("ts") or "")
    request.save(update_fields=["channel", "ts"])
    return request


def question(user: Any, token: str) -> tuple[str, list[dict[str, Any]]]:
    """The direct message: who asks, and the button that says yes, carrying the token."""
    name = escaped(user.get_username())
    text = (
        f"*{name}* asked the approval gateway to link this Slack account to their gateway "
        f"account: your clicks on requests in Slack will then act as {name}. If that was not "
        f"you, ignore this message; it expires in {LINK_MINUTES} minutes."
    )
    button = {
        "type": "button",
        "action_id": CONFIRM,
        "text": {"type": "plain_text", "text": "Yes, link my account"},
        "style": "primary",
        "value": token,
    }
    blocks = [
        {"type": "section", "text": {"type": "mrkdwn", "text": text}},
        {"type": "actions", "elements": [button]},
    ]
    return text, blocks


def confirm(payload: dict[str, Any], token: str) -> str:
    """The button clicked: link the clicker to the gateway user who asked, use the token and
    audit it in one transaction, then update the message. Returns the refusal to tell the
    clicker ("" when linked)."""
    slack_user = str((payload.get("user") or {}).get("id") or "")
    now = timezone.now()
    try:
        with transaction.atomic():
            request = (
                SlackLinkRequest.objects.select_for_update()
                .select_related("user")
                .filter(token_hash=digest(token), used_at__isnull=True, expires_at__gt=now)
                .first()
            )
            if request is None or not request.user.is_active:
                return UNUSABLE
            if request.slack_user_id != slack_user:
                return NOT_YOURS
            found = SlackLink.objects.filter(slack_user_id=slack_user).first()
            if found is not None and found.user_id != request.user_id:
                return TAKEN
            if found is None and SlackLink.objects.filter(user=request.user).exists():
                return YOURS_TAKEN
            # Claimed by a conditional update: of two clicks at once, one links.
            claimed = SlackLinkRequest.objects.filter(pk=request.pk, used_at__isnull=True)
            if claimed.update(used_at=now) != 1:
                return UNUSABLE
            if found is None:  # else linked to each other meanwhile (by email): nothing to add
                links.link(request.user, slack_user, via="connect")
    except IntegrityError:
        return TAKEN  # linked by another way (an email, the admin) at the same moment
    log.info("Slack: linked %s to %s by the Connect step", slack_user, request.user)
    _linked_message(request)
    return ""


def _linked_message(request: SlackLinkRequest) -> None:
    """The direct message says it is done, without its button. After the commit: the link is
    made whether or not Slack takes the update."""
    text = f"Linked to gateway user {escaped(request.user.get_username())}."
    blocks = [{"type": "section", "text": {"type": "mrkdwn", "text": f":white_check_mark: {text}"}}]
    try:
        client.web_client(client.CLICK_TIMEOUT).chat_update(
            channel=request.channel, ts=request.ts, text=text, blocks=blocks
        )
    except (SlackApiError, OSError) as e:
        log.warning("Slack: could not update the link message to %s: %s", request.slack_user_id, e)
