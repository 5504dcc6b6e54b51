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
pages use. Reject… opens a modal asking the reason (slack_approvals.modals); its submission
rejects, or shows the refusal in the modal. Answer… does the same for a question
(slack_approvals.answers). A click Slack sends again (X-Slack-Retry-Num) is
recognised by its trigger id, recorded in the decision's transaction, and never decides twice.
"""

import json
import logging
from typing import Any
from urllib.parse import parse_qs

from django.conf import settings
from django.db import IntegrityError, transaction
from django.http import HttpRequest, HttpResponse, JsonResponse
from django.views.decorators.csrf import csrf_exempt
from django.views.decorators.http import require_POST
from slack_sdk.errors import SlackApiError
from slack_sdk.signature import SignatureVerifier

from access import ratelimits
from agents import presentation
from approvals.api.decisions import decide_one
from approvals.api.suspensions import suspension_or_none
from slack_approvals import answers, client, connect, links, message, modals
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
    if not _signed(request):
        log.warning("Slack: a request to /slack/interactions failed the signature check")
        return HttpResponse(status=401)
    try:
        payload = json.loads(parse_qs(request.body.decode())["payload"][0])
    except (KeyError, ValueError, UnicodeDecodeError):
        return HttpResponse(status=400)
    if payload.get("type") == "block_actions":
        for action in payload.get("actions") or []:
            if action.get("action_id") == "approve":
                _decide(payload, str(action.get("value") or ""), {"approved": True})
            elif action.get("action_id") == "reject":
                _open(payload, str(action.get("value") or ""), modals.reject_view)
            elif action.get("action_id") == answers.ANSWER:
                _open(payload, str(action.get("value") or ""), answers.answer_view)
            elif action.get("action_id") == connect.CONFIRM:
                if refusal := connect.confirm(payload, str(action.get("value") or "")):
                    _tell(payload, refusal)
    elif payload.get("type") == "view_submission":
        view = payload.get("view") or {}
        if view.get("callback_id") == modals.REJECT:
            suspension_id = str(view.get("private_metadata") or "")
            s = suspension_or_none(suspension_id)
            reasons = presentation.payload(s)["reject_reasons"] if s is not None else []
            refusal = _decide(payload, suspension_id, modals.rejection(view, reasons))
            if refusal:
                return JsonResponse(modals.errors(refusal))
        elif view.get("callback_id") == answers.ANSWER:
            s = suspension_or_none(str(view.get("private_metadata") or ""))
            if s is None:
                return JsonResponse({"response_action": "errors", "errors": {answers.TEXT: GONE}})
            decision, wrong = answers.response(view, s)
            if wrong:
                return JsonResponse({"response_action": "errors", "errors": wrong})
            refusal = _decide(payload, str(s.pk), decision)
            if refusal:
                errors = {answers.first_block(s): refusal[:2000]}
                return JsonResponse({"response_action": "errors", "errors": errors})
    # Slack wants an answer within three seconds; it carries nothing (the modal closes).
    return HttpResponse(status=200)


def _signed(request: HttpRequest) -> bool:
    """Is the raw body signed with the signing secret, at a time within five minutes?"""
    timestamp = request.headers.get("X-Slack-Request-Timestamp", "")
    signature = request.headers.get("X-Slack-Signature", "")
    if not timestamp.isdigit() or not signature:
        return False  # the verifier would fail on a timestamp that is not a number
    verifier = SignatureVerifier(settings.SLACK_SIGNING_SECRET)
    return verifier.is_valid(body=request.body, timestamp=timestamp, signature=signature)


def _clicker(payload: dict[str, Any], suspension_id: str) -> tuple[Any, Any, str]:
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


def _decide(payload: dict[str, Any], suspension_id: str, decision: dict[str, Any]) -> str:
    """Decide for the clicker as resumeExecution would; returns the refusal ("" for none),
    already told to the clicker when it came from a button."""
    s, user, refusal = _clicker(payload, suspension_id)
    trigger = str(payload.get("trigger_id") or "")
    if not refusal and trigger:
        try:
            with transaction.atomic():
                SlackClick.objects.create(trigger_id=trigger)
                # Counted as the REST API counts a decision (RATE_LIMIT_USER_DECISIONS).
                ratelimits.hit(ratelimits.DECISIONS, user)
                answer = decide_one(s, user, decision)
        except IntegrityError:
            log.info("Slack: click %s was acted on already", trigger)
            return ""
        except ratelimits.Limited as e:
            refusal = e.detail  # the click is forgotten: a later one may decide
        else:
            if answer.status >= 300:
                refusal = str(answer.body.get("detail") or "This changed nothing.")
    # (Every click Slack sends has a trigger id: without one a retry could not be known.)
    if refusal and payload.get("type") == "block_actions":
        _tell(payload, refusal)
    return refusal


def _open(payload: dict[str, Any], suspension_id: str, view: Any) -> None:
    """Reject… or Answer…: the modal that asks the reason or the answer; the decision comes
    with its submission. Who may not decide is told at once, before typing anything."""
    s, _, refusal = _clicker(payload, suspension_id)
    if refusal:
        _tell(payload, refusal)
        return
    try:
        client.web_client(client.CLICK_TIMEOUT).views_open(
            trigger_id=str(payload.get("trigger_id") or ""), view=view(s)
        )
    except (SlackApiError, OSError) as e:
        log.warning("Slack: could not open a modal: %s", e)


def _tell(payload: dict[str, Any], text: str) -> None:
    """An ephemeral message to the clicker alone. Sent at once, briefly: a lost one changes
    nothing, and the clicker can click again."""
    channel = str((payload.get("channel") or payload.get("container") or {}).get("id") or "")
    channel = channel or str((payload.get("container") or {}).get("channel_id") or "")
    user = str((payload.get("user") or {}).get("id") or "")
    try:
        client.web_client(client.CLICK_TIMEOUT).chat_postEphemeral(
            channel=channel, user=user, text=message.escaped(text, limit=3000)
        )
    except (SlackApiError, OSError) as e:
        log.warning("Slack: could not answer %s: %s", user, e)
