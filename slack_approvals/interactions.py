"""POST /slack/interactions: the buttons and modals of Slack's messages, served by the Bolt App
(slack_approvals.bolt_app) through slack_bolt's Django adapter.

Slack is off (404, and no App is made) unless the token and the secret are set. Bolt checks
every request's signature (HMAC with SLACK_SIGNING_SECRET over the timestamp and the raw
body) and a timestamp within five minutes before any listener runs; a request that fails
answers 401 (Bolt's RequestVerification) and is logged here. What a click does is in
slack_approvals.clicks.
"""

import logging

from django.http import HttpRequest, HttpResponse
from django.views.decorators.csrf import csrf_exempt
from django.views.decorators.http import require_POST

from slack_approvals import bolt_app, client

log = logging.getLogger(__name__)


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
            answer = bolt_app.handler().handle(request)
        except ValueError:  # the adapter reads the body first: not UTF-8, or a payload not JSON
            log.warning("Slack: a request to /slack/interactions was not Slack's form")
            return HttpResponse(status=400)
    if answer.status_code == 401:
        log.warning("Slack: a request to /slack/interactions failed the signature check")
    return answer
