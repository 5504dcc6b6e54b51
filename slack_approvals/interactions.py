"""POST /slack/interactions: the buttons of Slack's messages, pressed by reviewers.

Every request is checked before anything in it is read: Slack's signature (HMAC with
SLACK_SIGNING_SECRET over the timestamp and the raw body, slack_sdk's SignatureVerifier)
and a timestamp within five minutes; anything else answers 401 and is logged. Slack is off
(404) unless the token and the secret are set.

A plain Django view rather than slack_bolt's App: Bolt's App checks its token with Slack when
it is made and answers through its own request cycle, while this view needs only the
signature check before reading, and then the REST API's own path to a decision
(approvals.api.decisions.decide_one: the body's checks, the version binding, and
agents.decisions.decide with its policy, locks and events), so a Slack click is decided
exactly as resumeExecution decides it.

A click acts as the gateway user linked to the Slack user (slack_approvals.links). An
unlinked clicker, one without the permission to decide, or one the policy refuses changes
nothing and is told why in an ephemeral message only they see, in the words the API and the
pages use. A click Slack sends again (X-Slack-Retry-Num) is recognised by its trigger id,
recorded in the decision's transaction, and never decides twice.
"""

import json
import logging
from typing import Any
from urllib.parse import parse_qs

from django.conf import settings
from django.db import IntegrityError, transaction
from django.http import HttpRequest, HttpResponse
from django.views.decorators.csrf import csrf_exempt
from django.views.decorators.http import require_POST
from slack_sdk.errors import SlackApiError
from slack_sdk.signature import SignatureVerifier

from approvals.api.decisions import decide_one
from approvals.api.suspensions import suspension_or_none
from slack_approvals import client, links, message
from slack_approvals.models import SlackClick

log = logging.getLogger(__name__)

DECIDE = "agents.decide_suspension"
NOT_LINKED = (
    "Your Slack account is not linked to a gateway user, so this click changed nothing. "
    "Open the request to decide it there."
)
NOT_ALLOWED = "You may not decide requests, so this click changed nothing."
GONE = "This request no longer exists."


@csrf_exempt
@require_POST
def interactions(request: HttpRequest) -> HttpResponse:
    if not client.enabled():
        return HttpResponse(status=404)
    verifier = SignatureVerifier(settings.SLACK_SIGNING_SECRET)
    if not verifier.is_valid(
        body=request.body,
        timestamp=request.headers.get("X-Slack-Request-Timestamp", ""),
        signature=request.headers.get("X-Slack-Signature", ""),
    ):
        log.warning("Slack: a request to /slack/interactions failed the signature check")
        return HttpResponse(status=401)
    try:
        payload = json.loads(parse_qs(request.body.decode())["payload"][0])
    except (KeyError, ValueError, UnicodeDecodeError):
        return HttpResponse(status=400)
    if payload.get("type") == "block_actions":
        for action in payload.get("actions") or []:
            if action.get("action_id") == "approve":
                _approve(payload, str(action.get("value") or ""))
    # Slack wants an answer within three seconds; it carries nothing.
    return HttpResponse(status=200)


def _approve(payload: dict[str, Any], suspension_id: str) -> None:
    slack_user = str((payload.get("user") or {}).get("id") or "")
    s = suspension_or_none(suspension_id)
    if s is None:
        _tell(payload, GONE)
        return
    user = links.user_for(slack_user)
    if user is None:
        _tell(payload, f"{NOT_LINKED} {message.card_url(s)}")
        return
    if not user.has_perm(DECIDE):
        _tell(payload, NOT_ALLOWED)
        return
    trigger = str(payload.get("trigger_id") or "")
    if not trigger:
        return  # every click Slack sends has one: without it, a retry could not be known
    try:
        with transaction.atomic():
            SlackClick.objects.create(trigger_id=trigger)
            answer = decide_one(s, user, {"approved": True})
    except IntegrityError:
        log.info("Slack: click %s was acted on already", payload.get("trigger_id"))
        return
    if answer.status >= 300:
        _tell(payload, str(answer.body.get("detail") or "This click changed nothing."))


def _tell(payload: dict[str, Any], text: str) -> None:
    """An ephemeral message to the clicker alone. Sent at once, briefly: a lost one changes
    nothing, and the clicker can click again."""
    channel = str((payload.get("channel") or payload.get("container") or {}).get("id") or "")
    channel = channel or str((payload.get("container") or {}).get("channel_id") or "")
    user = str((payload.get("user") or {}).get("id") or "")
    try:
        client.web_client().chat_postEphemeral(channel=channel, user=user, text=text)
    except (SlackApiError, OSError) as e:
        log.warning("Slack: could not answer %s: %s", user, e)
