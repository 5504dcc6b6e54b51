"""The Bolt App that answers Slack's interactions: one listener per button and per modal.

Made lazily, once per process (once per set of Slack settings, so a test that changes them gets
its own), and served by slack_bolt's Django adapter (slack_approvals.interactions). Nothing in
it calls Slack when it is made or before a listener runs: Bolt's single-token authorization
would ask Slack's auth.test who the token is on the first click (with
token_verification_enabled=False, lazily instead of at start), so the first clicks after a
start would fail (500) while Slack is unreachable; the token is given by `authorize` instead,
as is. Bolt checks each
request's signature and timestamp before any listener runs (its RequestVerification answers
401).

process_before_response=True: Bolt answers Slack only after the listener returns, so a
decision is made inside the request (a retry of a click finds it recorded; the tests read it
at once), and a refused modal's errors go back in the answer. The listeners stay within
Slack's three seconds: each calls Slack at most once, with a short timeout
(slack_approvals.client.CLICK_TIMEOUT).

Bolt runs the first listener whose action_id or callback_id matches; an action or a modal no
listener names (a button of an older message, a future one) is acked and changes nothing, so
Slack shows no error. A new button is one more entry in ACTIONS.
"""

import functools
import logging
import re
from collections.abc import Callable
from typing import Any

from django.conf import settings
from slack_bolt import Ack, App
from slack_bolt.adapter.django import SlackRequestHandler
from slack_bolt.authorization import AuthorizeResult
from slack_sdk import WebClient

from agents import presentation
from approvals.api.suspensions import suspension_or_none
from slack_approvals import answers, clicks, connect, modals
from slack_approvals.client import CLICK_TIMEOUT, web_client

log = logging.getLogger(__name__)
ANY = re.compile(".*")


def _value(action: dict[str, Any]) -> str:
    """The request a button is about: its id, as the message put it in the button's value."""
    return str(action.get("value") or "")


def approve(ack: Ack, body: dict[str, Any], action: dict[str, Any], client: WebClient) -> None:
    """Approve: decided at once."""
    ack()
    clicks.decide(client, body, _value(action), {"approved": True})


def reject(ack: Ack, body: dict[str, Any], action: dict[str, Any], client: WebClient) -> None:
    """Reject…: the modal asking the reason (slack_approvals.modals)."""
    ack()
    clicks.open_modal(client, body, _value(action), modals.reject_view)


def answer(ack: Ack, body: dict[str, Any], action: dict[str, Any], client: WebClient) -> None:
    """Answer…: the modal asking the answer (slack_approvals.answers)."""
    ack()
    clicks.open_modal(client, body, _value(action), answers.answer_view)


def confirm_link(ack: Ack, body: dict[str, Any], action: dict[str, Any], client: WebClient) -> None:
    """ "Yes, link my account" in the Connect Slack message (slack_approvals.connect)."""
    ack()
    refusal = connect.confirm(body, _value(action))
    if refusal:
        clicks.tell(client, body, refusal)


def nothing(ack: Ack) -> None:
    """Open (a link button: Slack opens the page and tells the app), or an action or a modal
    no listener knows: acked, nothing changes."""
    ack()


def rejected(ack: Ack, body: dict[str, Any], view: dict[str, Any], client: WebClient) -> None:
    """Reject…'s modal submitted: rejects with the reason, or keeps the modal open with the
    refusal under the reason's field."""
    suspension_id = str(view.get("private_metadata") or "")
    s = suspension_or_none(suspension_id)
    reasons = presentation.payload(s)["reject_reasons"] if s is not None else []
    refusal = clicks.decide(client, body, suspension_id, modals.rejection(view, reasons))
    if refusal:
        ack(response_action="errors", errors=modals.errors(refusal))
    else:
        ack()  # an empty answer: the modal closes


def answered(ack: Ack, body: dict[str, Any], view: dict[str, Any], client: WebClient) -> None:
    """Answer…'s modal submitted: answers as the page does, or keeps the modal open with what
    is wrong under its field, or the refusal under the first."""
    s = suspension_or_none(str(view.get("private_metadata") or ""))
    if s is None:
        ack(response_action="errors", errors={answers.TEXT: clicks.GONE})
        return
    decision, wrong = answers.response(view, s)
    if wrong:
        ack(response_action="errors", errors=wrong)
        return
    refusal = clicks.decide(client, body, str(s.pk), decision)
    if refusal:
        ack(response_action="errors", errors={answers.first_block(s): refusal[:2000]})
    else:
        ack()


# The buttons of slack_approvals.message, by action_id, and the modals, by callback_id.
ACTIONS: dict[str, Callable[..., None]] = {
    "approve": approve,
    "reject": reject,
    answers.ANSWER: answer,
    connect.CONFIRM: confirm_link,
    "open": nothing,
}
VIEWS: dict[str, Callable[..., None]] = {modals.REJECT: rejected, answers.ANSWER: answered}


def handler() -> SlackRequestHandler:
    """The Django adapter of this process's App."""
    return _handler(settings.SLACK_BOT_TOKEN, settings.SLACK_SIGNING_SECRET, settings.SLACK_API_URL)


@functools.lru_cache(maxsize=1)
def _handler(token: str, signing_secret: str, api_url: str) -> SlackRequestHandler:
    """The App and its adapter for these settings (the arguments are the cache's key;
    web_client reads the same settings)."""

    def authorize(enterprise_id: str | None, team_id: str | None) -> AuthorizeResult:
        return AuthorizeResult(enterprise_id=enterprise_id, team_id=team_id, bot_token=token)

    app = App(
        name="slack_approvals",
        logger=log,
        signing_secret=signing_secret,
        authorize=authorize,
        # Each request's client is a copy of this one (SLACK_API_URL, the click's timeout)
        # with the token authorize gives.
        client=web_client(CLICK_TIMEOUT),
        process_before_response=True,
    )
    for action_id, listener in ACTIONS.items():
        app.action(action_id)(listener)
    for callback_id, listener in VIEWS.items():
        app.view(callback_id)(listener)
    # Last: Bolt runs the first listener that matches.
    app.action(ANY)(nothing)
    app.view(ANY)(nothing)
    return SlackRequestHandler(app)
