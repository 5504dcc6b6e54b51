"""Sending: one delivery's call to Slack's Web API, retried on a schedule, each attempt logged.

A delivery is claimed by a conditional update (its next attempt moved from the past to a
lease's end), so two tasks for one delivery send it once; a worker that dies leaves it due
again when the lease ends, and the sweep (enqueue_due) hands it out again. Slack's answer
decides the rest: success finishes it; a rate limit waits at least its Retry-After; an error
Slack will repeat (a channel that does not exist, a revoked token) fails it at once; any other
failure is tried again after the next step of RETRY_SCHEDULE, and fails when it runs out.
The log keeps Slack's error code and HTTP status, never the token (slack_sdk redacts the
Authorization header from its own debug log too).
"""

import logging
from datetime import datetime, timedelta

from celery import current_app
from django.db.models import F
from django.utils import timezone
from slack_sdk.errors import SlackApiError

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


class NotPostedYet(Exception):
    """An update came before its request's message was posted: tried again later."""


def enqueue(ids: list[int]) -> None:
    """Send deliveries to the workers; a broker that is away fails nothing (the sweep)."""
    try:
        for pk in ids:
            current_app.send_task("slack_approvals.tasks.deliver", args=(pk,))
    except Exception:
        log.warning("could not enqueue Slack deliveries; the sweep will", exc_info=True)


def enqueue_due(now: datetime | None = None) -> int:
    """The sweep: enqueue the pending deliveries whose attempt is due."""
    now = now or timezone.now()
    ids = list(
        SlackDelivery.objects.filter(status=Status.PENDING, next_attempt_at__lte=now)
        .order_by("next_attempt_at")
        .values_list("pk", flat=True)[:500]
    )
    enqueue(ids)
    return len(ids)


def claim(pk: int, now: datetime) -> SlackDelivery | None:
    """The delivery, if it is pending and due and this call took it."""
    won = SlackDelivery.objects.filter(
        pk=pk, status=Status.PENDING, next_attempt_at__lte=now
    ).update(next_attempt_at=now + LEASE, attempts=F("attempts") + 1)
    if not won:
        return None
    return SlackDelivery.objects.select_related("suspension__thread").get(pk=pk)


def send(pk: int, now: datetime | None = None) -> str:
    """Attempt one delivery; returns what became of it ("" when it was not this call's)."""
    now = now or timezone.now()
    delivery = claim(pk, now)
    if delivery is None:
        return ""
    attempt = SlackAttempt(delivery=delivery, number=delivery.attempts, started_at=now)
    retry_after = 0
    try:
        perform(delivery, now)
    except SlackApiError as e:
        attempt.status_code = e.response.status_code
        code = str(e.response.get("error") or "")
        attempt.error = f"{code or 'error'} (HTTP {e.response.status_code})"
        retry_after = int(e.response.headers.get("Retry-After", 0) or 0)
        permanent = code in PERMANENT
    except NotPostedYet:
        attempt.error = "the request's message is not posted yet"
        permanent = False
    except Exception as e:  # a connection refused or reset, a timeout: tried again
        attempt.error = f"{type(e).__name__}: {e}"
        permanent = False
    else:
        attempt.succeeded = True
        attempt.save()
        SlackDelivery.objects.filter(pk=pk).update(
            status=Status.SUCCEEDED, finished_at=timezone.now(), last_error=""
        )
        return Status.SUCCEEDED
    attempt.save()
    log.warning("Slack delivery %d, attempt %d: %s", pk, attempt.number, attempt.error)
    if permanent or delivery.attempts > len(RETRY_SCHEDULE):
        SlackDelivery.objects.filter(pk=pk).update(
            status=Status.FAILED, finished_at=timezone.now(), last_error=attempt.error
        )
        return Status.FAILED
    delay = max(RETRY_SCHEDULE[delivery.attempts - 1], retry_after)
    SlackDelivery.objects.filter(pk=pk).update(
        next_attempt_at=now + timedelta(seconds=delay), last_error=attempt.error
    )
    try:
        current_app.send_task("slack_approvals.tasks.deliver", args=(pk,), countdown=delay)
    except Exception:
        log.warning("could not enqueue a Slack retry; the sweep will", exc_info=True)
    return Status.PENDING


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
