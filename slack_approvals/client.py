"""The Slack Web API client (slack_sdk's WebClient), and whether Slack is on at all."""

from django.conf import settings
from slack_sdk import WebClient

# Seconds one Web API call may take; a slower Slack fails the attempt, which is retried
# (slack_approvals.outbox), and never holds up the engine, which only records events.
TIMEOUT = 10
# A call made while Slack waits for the answer to a click (an ephemeral reply, the modal, a
# user looked up), which Slack wants within three seconds.
CLICK_TIMEOUT = 2


def enabled() -> bool:
    """Slack is on only with both the bot's token and the signing secret: without the secret
    no click could be checked, so no message with buttons is posted either."""
    return bool(settings.SLACK_BOT_TOKEN and settings.SLACK_SIGNING_SECRET)


def web_client(timeout: int = TIMEOUT) -> WebClient:
    """A client for SLACK_API_URL with the bot's token. slack_sdk's own retry handlers are
    left at their default (a connection reset, once); every other retry is the outbox's, so
    each shows in the delivery log."""
    base_url = settings.SLACK_API_URL
    if not base_url.endswith("/"):
        base_url += "/"  # the client joins method names onto it
    return WebClient(token=settings.SLACK_BOT_TOKEN, base_url=base_url, timeout=timeout)
