"""POST /slack/interactions: the buttons and modals of Slack's messages, served by the Bolt App
(slack_approvals.bolt_app) through slack_bolt's Django adapter.

Slack is off (404, and no App is made) unless the token and the secret are set. Bolt checks
every request's signature (HMAC with SLACK_SIGNING_SECRET over the timestamp and the raw
body) and a timestamp within five minutes before any listener runs; a request that fails
answers 401 (Bolt's RequestVerification) and is logged here. A body that is not Slack's form,
or whose payload is not shaped as Slack's (`shaped`: parts Bolt reads without a check, such as
a submitted view's `type`), answers 400 before Bolt reads it, signed or not, and changes
nothing. What a click does is in slack_approvals.clicks.
"""

import json
import logging
from typing import Any
from urllib.parse import parse_qs

from django.http import HttpRequest, HttpResponse
from django.views.decorators.csrf import csrf_exempt
from django.views.decorators.http import require_POST

from slack_approvals import bolt_app, client

log = logging.getLogger(__name__)

# The parts of a payload Bolt reads as objects when they are there (its matchers and context
# builder call .get on them or index them), and those whose `type` it reads unchecked.
OBJECTS = ("user", "team", "enterprise", "channel", "container", "message", "view", "event")
TYPED = ("view", "event")


def shaped(body: Any) -> bool:
    """Is `body` (the payload of a form, or a JSON body) shaped as Slack's, as far as Bolt
    relies on it? An object; its parts that Bolt reads as objects are objects; a view's and
    an event's `type` a string; `actions` a list of objects."""
    if not isinstance(body, dict):
        return False
    if any(not isinstance(body[k], dict) for k in OBJECTS if k in body):
        return False
    if any(not isinstance(body[k].get("type"), str) for k in TYPED if k in body):
        return False
    actions = body.get("actions", [])
    return isinstance(actions, list) and all(isinstance(a, dict) for a in actions)


def payload(request: HttpRequest) -> Any:
    """The body as Bolt reads it: a form's `payload` field as JSON, else the JSON body, else
    the form. Raises ValueError when it is none of these (not UTF-8, not JSON)."""
    text = request.body.decode()
    if request.content_type == "application/json":
        return json.loads(text)
    form = parse_qs(text)
    return json.loads(form["payload"][0]) if "payload" in form else form


@csrf_exempt
@require_POST
def interactions(request: HttpRequest) -> HttpResponse:
    if not client.enabled():
        return HttpResponse(status=404)
    if not request.headers.get("X-Slack-Request-Timestamp", "0").isdigit():
        # slack_sdk's verifier raises on a timestamp that is not a number (Bolt would answer
        # 500): refused as any unsigned request is.
        answer = HttpResponse(status=401)
    else:
        try:
            if not shaped(payload(request)):
                raise ValueError("not shaped as Slack's payloads")
        except ValueError:  # not UTF-8, a payload not JSON, or not shaped as Slack's
            log.warning("Slack: a request to /slack/interactions was not Slack's form")
            return HttpResponse(status=400)
        answer = bolt_app.handler().handle(request)
    if answer.status_code == 401:
        log.warning("Slack: a request to /slack/interactions failed the signature check")
    return answer
