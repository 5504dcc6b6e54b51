"""The Slack Web API client (slack_sdk's WebClient), and whether Slack is on at all.

slack_sdk is imported when a client is made, not with this module: every worker imports it
(the Slack sweep and fan-out) and, without Slack, never calls it (issue 42)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from django.conf import settings

if TYPE_CHECKING:
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
    from slack_sdk import WebClient

    base_url = settings.SLACK_API_URL
    if not base_url.endswith("/"):
        base_url += "/"  # the client joins method names onto it
    return WebClient(token=settings.SLACK_BOT_TOKEN, base_url=base_url, timeout=timeout)
