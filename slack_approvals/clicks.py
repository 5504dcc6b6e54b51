"""What a click or a modal's submission does: decide through the door, open a modal, or tell
the clicker why nothing changed. Called by the Bolt listeners (slack_approvals.bolt_app) with
the request's Web API client.

A click acts as the gateway user linked to the Slack user (slack_approvals.links): its
decision is checked as a resumeExecution body is (approvals.api.decisions.parse_decision) and
taken by the one door for decisions (agents.door.take: the version binding, the policy, the
locks, the events), so a Slack click is decided exactly as resumeExecution decides it; the
outcome is told in Slack's words, not read from the API's status codes. An unlinked clicker,
one without the permission to decide, or one the policy refuses changes nothing and is told
why in an ephemeral message only they see, in the words the API and the pages use. A click
Slack sends again (X-Slack-Retry-Num) is recognised by its trigger id, recorded in the
decision's transaction (SlackClick), and never decides twice.
"""

import logging
from collections.abc import Callable
from typing import Any

from django.db import IntegrityError, transaction
from slack_sdk import WebClient
from slack_sdk.errors import SlackApiError

from access import ratelimits
from agents import door
from agents.models import Suspension
from approvals.api.decisions import parse_decision
from approvals.api.suspensions import suspension_or_none
from approvals.http import BadRequest
from slack_approvals import links, message
from slack_approvals.models import SlackClick

log = logging.getLogger(__name__)

DECIDE = "agents.decide_suspension"
NOT_LINKED = (
    "Your Slack account is not linked to a gateway user, so this click changed nothing. "
    "Open the request to decide it there."
)
NOT_ALLOWED = "You may not decide requests, so this click changed nothing."
GONE = "This request no longer exists."


def clicker(payload: dict[str, Any], suspension_id: str) -> tuple[Any, Any, str]:
    """The request, the gateway user who acts, and why nothing may be done ("" when it may)."""
    slack_user = str((payload.get("user") or {}).get("id") or "")
    s = suspension_or_none(suspension_id)
    if s is None:
        return None, None, GONE
    user = links.user_for(slack_user)
    if user is None:
        return s, None, f"{NOT_LINKED} {message.card_url(s)}"
    if not user.has_perm(DECIDE):
        return s, user, NOT_ALLOWED
    return s, user, ""


def decide(
    slack: WebClient, payload: dict[str, Any], suspension_id: str, decision: dict[str, Any]
) -> str:
    """Decide for the clicker as resumeExecution would; returns the refusal ("" for none),
    already told to the clicker when it came from a button."""
    s, user, refusal = clicker(payload, suspension_id)
    trigger = str(payload.get("trigger_id") or "")
    if not refusal and trigger:
        try:
            with transaction.atomic():
                SlackClick.objects.create(trigger_id=trigger)
                # Counted as the REST API counts a decision (RATE_LIMIT_USER_DECISIONS).
                ratelimits.hit(ratelimits.DECISIONS, user)
                refusal = refused(s, user, decision)
        except IntegrityError:
            log.info("Slack: click %s was acted on already", trigger)
            return ""
        except ratelimits.Limited as e:
            refusal = e.detail  # the click is forgotten: a later one may decide
    # (Every click Slack sends has a trigger id: without one a retry could not be known.)
    if refusal and payload.get("type") == "block_actions":
        tell(slack, payload, refusal)
    return refusal


def refused(s: Suspension, user: Any, body: dict[str, Any]) -> str:
    """Take the decision a button or a modal sent (a resumeExecution body); why nothing
    changed, in words for the clicker ("" when it was taken, counted as a vote, or repeated)."""
    try:
        decision = parse_decision(s, body)
    except BadRequest as e:
        return e.detail
    match door.take(s, user, decision):
        case door.Decided() | door.Voted() | door.Repeat():
            return ""
        case door.Conflict(detail=detail) | door.Unbound(detail=detail):
            return detail
        case door.Refused(detail=detail):
            # The policy's words, which name its rule ("... (four eyes).", "Only group ...").
            return detail
    return "This changed nothing."


def open_modal(
    slack: WebClient,
    payload: dict[str, Any],
    suspension_id: str,
    view: Callable[[Suspension], dict[str, Any]],
) -> None:
    """Reject… or Answer…: the modal that asks the reason or the answer; the decision comes
    with its submission. Who may not decide is told at once, before typing anything."""
    s, _, refusal = clicker(payload, suspension_id)
    if refusal:
        tell(slack, payload, refusal)
        return
    try:
        slack.views_open(trigger_id=str(payload.get("trigger_id") or ""), view=view(s))
    except (SlackApiError, OSError) as e:
        log.warning("Slack: could not open a modal: %s", e)


def tell(slack: WebClient, payload: dict[str, Any], text: str) -> None:
    """An ephemeral message to the clicker alone. Sent at once, briefly: a lost one changes
    nothing, and the clicker can click again."""
    channel = str((payload.get("channel") or payload.get("container") or {}).get("id") or "")
    channel = channel or str((payload.get("container") or {}).get("channel_id") or "")
    user = str((payload.get("user") or {}).get("id") or "")
    try:
        slack.chat_postEphemeral(channel=channel, user=user, text=message.escaped(text, limit=3000))
    except (SlackApiError, OSError) as e:
        log.warning("Slack: could not answer %s: %s", user, e)
