"""Sending to Slack: one delivery's calls to Slack's Web API. The claim, the lease, the retry
schedule and the attempt log are the shared outbox's (agents.delivery.outbox).

Slack's answer decides the rest: success finishes a delivery; a rate limit waits at least its
Retry-After; an error Slack will repeat (a channel that does not exist, a revoked token) is
permanent and fails it at once; any other failure is tried again after the next step of
RETRY_SCHEDULE (the retry sent at once with its wait as a countdown), and fails when it runs
out. The log keeps Slack's error code and HTTP status, never the token (slack_sdk redacts the
Authorization header from its own debug log too).
"""

from __future__ import annotations

import logging
from datetime import datetime, timedelta

from agents.delivery import outbox as shared
from agents.delivery.outbox import Result
from agents.models import Event, Suspension
from slack_approvals import client, group_message, message
from slack_approvals.models import SlackAttempt, SlackDelivery, SlackLink, SlackMessage

log = logging.getLogger(__name__)

# Seconds before each retry; a delivery fails after len(RETRY_SCHEDULE) + 1 attempts.
RETRY_SCHEDULE = [2, 10, 60, 300, 1800]
LEASE = timedelta(seconds=60)  # longer than an attempt can take (client.TIMEOUT, a few calls)
PERMANENT = {
    "channel_not_found",
    "not_in_channel",
    "is_archived",
    "invalid_auth",
    "not_authed",
    "account_inactive",
    "token_revoked",
    "missing_scope",
    "invalid_blocks",
    "user_not_found",
}
Status = SlackDelivery.Status
# The shared outbox's outcomes in a delivery's status ("" when it was not this call's).
WORDS = {"succeeded": Status.SUCCEEDED, "retry": Status.PENDING, "dead-lettered": Status.FAILED}


class NotPostedYet(Exception):
    """An update came before its request's message was posted: tried again later."""


class Outbox(shared.Outbox):
    model = SlackDelivery
    attempt_model = SlackAttempt
    task = "slack_approvals.tasks.deliver"
    send_retries = True

    def lease(self) -> timedelta:
        return LEASE

    def schedule(self) -> list[float]:
        return list(RETRY_SCHEDULE)

    def load(self, pk: int) -> SlackDelivery:
        return SlackDelivery.objects.select_related("suspension__thread").get(pk=pk)

    def deliver(self, d: SlackDelivery, now: datetime) -> Result:
        from slack_sdk.errors import SlackApiError  # here: slack_approvals.client says why

        try:
            perform(d, now)
        except SlackApiError as e:
            code = str(e.response.get("error") or "")
            return Result(
                False,
                status_code=e.response.status_code,
                error=f"{code or 'error'} (HTTP {e.response.status_code})",
                permanent=code in PERMANENT,
                retry_after=int(e.response.headers.get("Retry-After", 0) or 0),
            )
        except NotPostedYet:
            return Result(False, error="the request's message is not posted yet")
        except Exception as e:  # a connection refused or reset, a timeout: tried again
            return Result(False, error=f"{type(e).__name__}: {e}")
        return Result(True)


# No jitter: Slack's schedule is short and a rate limit's Retry-After is kept exactly.
outbox = Outbox(jitter=lambda: 1.0)
enqueue = outbox.enqueue
enqueue_due = outbox.enqueue_due


def send(pk: int, token: str = "") -> str:
    """Attempt one delivery; returns what became of it ("" when it was not this call's)."""
    return WORDS.get(outbox.send(pk, token), "")


def perform(delivery: SlackDelivery, now: datetime) -> None:
    """The Web API calls of one delivery; raises on a failure."""
    suspension = Suspension.objects.select_related("thread").get(pk=delivery.suspension_id)
    web = client.web_client()
    text, blocks = group_message.compose(suspension, now)
    if delivery.action == SlackDelivery.Action.POST:
        channel = delivery.channel or _direct_conversation(web, delivery.dm_user)
        if (
            not channel
            or SlackMessage.objects.filter(suspension=suspension, channel=channel).exists()
        ):
            return  # nobody to write to any more, or posted by an attempt that died after
        answer = web.chat_postMessage(channel=channel, text=text, blocks=blocks)
        # One message for the calls made together: each of them knows it, to update it.
        for member in group_message.members(suspension):
            SlackMessage.objects.get_or_create(
                suspension=member, channel=answer["channel"], defaults={"ts": answer["ts"]}
            )
        return
    posted = list(SlackMessage.objects.filter(suspension=suspension))
    if delivery.action == SlackDelivery.Action.REPLY and posted:
        _reply(web, delivery, suspension, posted, now)
        return
    if not posted:
        if SlackDelivery.objects.filter(
            suspension=suspension, action=SlackDelivery.Action.POST, status=Status.PENDING
        ).exists():
            raise NotPostedYet
        return  # every post failed: there is nothing to update
    for m in posted:
        web.chat_update(channel=m.channel, ts=m.ts, text=text, blocks=blocks)


def _reply(
    web: client.WebClient,
    delivery: SlackDelivery,
    suspension: Suspension,
    posted: list[SlackMessage],
    now: datetime,
) -> None:
    """A reminder or an escalation, in the thread of each message of the request that waits
    still (once decided, its message says so and a reminder would only be noise). Each
    conversation answered is kept on the delivery, so a retry after a failure sends no reply
    twice."""
    if suspension.status != Suspension.Status.PENDING:
        return
    event = Event.objects.get(pk=delivery.event_id)
    text = message.reply(suspension, event, now)
    for m in posted:
        if m.channel in delivery.replied_in:
            continue
        web.chat_postMessage(channel=m.channel, thread_ts=m.ts, text=text)
        delivery.replied_in = [*delivery.replied_in, m.channel]
        delivery.save(update_fields=["replied_in"])


def _direct_conversation(web: client.WebClient, username: str) -> str:
    """The direct conversation with the gateway user's linked Slack account; "" when the
    link is gone since the fan-out."""
    link = SlackLink.objects.filter(user__username=username).first()
    if link is None:
        log.info("Slack: %s is no longer linked; no direct message sent", username)
        return ""
    answer = web.conversations_open(users=link.slack_user_id)
    return str(answer["channel"]["id"])
