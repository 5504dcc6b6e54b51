"""Sending deliveries: claim one, POST it (signed per Standard Webhooks, or with an A2A push
config's authentication), record the attempt, then succeed, schedule the retry or dead-letter
it; a subscription whose deliveries keep dying is disabled and its owner told."""

import asyncio
import json
import logging
import random
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

import httpx
from django.conf import settings
from django.core.mail import send_mail
from django.db import transaction
from django.db.models import F, Q
from django.utils import timezone

from a2a_server import notifications
from agents import events
from infra import addresses
from webhooks.models import Attempt, Delivery, Notice, Subscription
from webhooks.queue import QUEUED_GRACE, enqueue
from webhooks.signing import signed_headers

log = logging.getLogger(__name__)

D = Delivery.Status
RESPONSE_KEPT = 500  # characters of a receiver's answer kept in the log
ERROR_KEPT = 1000
USER_AGENT = "approval-gateway-webhooks/1"


def _free(now: datetime) -> Q:
    return Q(locked_until__isnull=True) | Q(locked_until__lte=now)


def enqueue_due(now: datetime | None = None, limit: int = 500) -> int:
    """Enqueue the pending deliveries whose attempt is due and that nobody holds: retries, and
    deliveries whose task was lost or whose worker died mid-attempt. Returns how many."""
    now = now or timezone.now()
    due = (
        Delivery.objects.filter(status=D.PENDING, next_attempt_at__lte=now)
        .filter(_free(now))
        .filter(Q(subscription__isnull=True) | Q(subscription__enabled=True))
        .order_by("next_attempt_at")
        .values_list("pk", flat=True)[:limit]
    )
    ids = list(due)
    if not ids:
        return 0
    token = uuid.uuid4().hex
    Delivery.objects.filter(pk__in=ids, status=D.PENDING).filter(_free(now)).update(
        lock_token=token, locked_until=now + QUEUED_GRACE
    )
    taken = list(Delivery.objects.filter(pk__in=ids, lock_token=token).values_list("pk", flat=True))
    enqueue(taken, token)
    return len(taken)


@dataclass(frozen=True)
class Response:
    succeeded: bool
    status_code: int | None = None
    response_ms: int | None = None
    error: str = ""
    body: str = ""


class Outbox:
    """Sends one delivery at a time. The clock, the jitter and the HTTP transport are
    injectable; by default the real ones."""

    def __init__(
        self,
        clock: Callable[[], datetime] = timezone.now,
        transport: httpx.AsyncBaseTransport | None = None,
        jitter: Callable[[], float] = lambda: random.uniform(0.75, 1.25),
    ) -> None:
        self.clock = clock
        self.transport = transport
        self.jitter = jitter

    def lease(self) -> timedelta:
        """How long an attempt holds its delivery: past it, the sweep lets another worker try
        (the first may then have sent it too: receivers dedupe on webhook-id). Longer than
        the POST may last (WEBHOOKS_DELIVERY_TIMEOUT_SECONDS), with time to resolve the
        receiver's name before it and record the attempt after it."""
        return timedelta(seconds=settings.WEBHOOKS_DELIVERY_TIMEOUT_SECONDS + 5)

    def send(self, delivery_id: int, token: str) -> str:
        """Attempt the delivery if it is still due and this task may take it; what happened."""
        now = self.clock()
        mine = uuid.uuid4().hex
        claimed = (
            Delivery.objects.filter(pk=delivery_id, status=D.PENDING, next_attempt_at__lte=now)
            .filter(Q(lock_token=token) | _free(now))
            .update(lock_token=mine, locked_until=now + self.lease())
        )
        if claimed != 1:
            return "taken"  # done, not due, or another task holds it
        d = Delivery.objects.select_related("event", "subscription", "push_config").get(
            pk=delivery_id
        )
        if d.subscription is not None and not d.subscription.enabled:
            # It waits, pending, for the subscription to be enabled again.
            Delivery.objects.filter(pk=d.pk, lock_token=mine).update(
                lock_token="", locked_until=None
            )
            return "disabled"
        url, body, headers = self.request_for(d, now)
        response = self.post(url, body, headers)
        return self.record(d, mine, now, response)

    def request_for(self, d: Delivery, now: datetime) -> tuple[str, str, dict[str, str]]:
        """URL, body and headers of the delivery's POST."""
        if d.subscription is not None:
            body = json.dumps(d.event.as_message(), separators=(",", ":"), ensure_ascii=False)
            headers = {
                "Content-Type": "application/json",
                **signed_headers(d.subscription.secret, d.webhook_id, body, now),
            }
            return d.subscription.url, body, headers
        body = json.dumps(
            notifications.push_body(d.event), separators=(",", ":"), ensure_ascii=False
        )
        return d.push_config.url, body, notifications.push_headers(d.push_config)

    def post(self, url: str, body: str, headers: dict[str, str]) -> Response:
        """POST to the address the URL's host resolves to, after the address check; no
        redirects (a redirect could point inside); each timeout WEBHOOKS_TIMEOUT_SECONDS, and
        the whole POST at most WEBHOOKS_DELIVERY_TIMEOUT_SECONDS (a failed attempt past it)."""
        try:
            target = addresses.target(url)
        except addresses.Refused as e:
            return Response(False, error=f"Refused: {e}")
        headers = {**headers, "User-Agent": USER_AGENT, "Host": target.host_header}
        extensions = {"sni_hostname": target.sni_hostname} if target.sni_hostname else {}
        # httpx's timeouts are per phase (connect, each read, each write): a receiver that
        # sends its status line, headers and body a byte at a time never trips them, and
        # httpx has no total deadline (encode/httpx#1450). A check between reads of the body
        # would come too late for a trickled status line, so the POST runs on httpx's async
        # client under asyncio.timeout, which cancels it wherever it waits and closes the
        # connection. The worker task is synchronous: an event loop of its own per delivery.
        return asyncio.run(self._post(target.url, body, headers, extensions))

    async def _post(
        self, url: str, body: str, headers: dict[str, str], extensions: dict[str, Any]
    ) -> Response:
        started = time.monotonic()
        limit = settings.WEBHOOKS_DELIVERY_TIMEOUT_SECONDS
        status: int | None = None
        try:
            async with asyncio.timeout(limit):
                async with httpx.AsyncClient(
                    transport=self.transport,
                    timeout=httpx.Timeout(settings.WEBHOOKS_TIMEOUT_SECONDS),
                    follow_redirects=False,
                    trust_env=False,  # no proxy from the environment: it would skip the check
                ) as client:
                    request = client.build_request(
                        "POST", url, content=body.encode(), headers=headers, extensions=extensions
                    )
                    r = await client.send(request, stream=True)
                    status = r.status_code
                    try:
                        text = await _start_of(r)
                    finally:
                        await r.aclose()
        except TimeoutError:
            error = f"DeliveryTimeout: no whole answer within {limit:g} s"
            return Response(False, status, _ms(started), error)
        except (httpx.HTTPError, httpx.InvalidURL) as e:
            return Response(False, status, _ms(started), f"{type(e).__name__}: {e}"[:ERROR_KEPT])
        ms = _ms(started)
        if 200 <= r.status_code < 300:
            return Response(True, r.status_code, ms, "", text)
        return Response(False, r.status_code, ms, f"HTTP {r.status_code}", text)

    def record(self, d: Delivery, mine: str, started_at: datetime, response: Response) -> str:
        """The attempt in the log, and the delivery's next state, in one transaction. If the
        lease ran out and another task took the delivery, only the attempt is written."""
        now = self.clock()
        schedule = settings.WEBHOOKS_RETRY_SCHEDULE
        retries = d.retries + (0 if response.succeeded else 1)
        fields: dict[str, Any] = {
            "attempts": F("attempts") + 1,
            "retries": retries,
            "last_status_code": response.status_code,
            "last_response_ms": response.response_ms,
            "last_error": response.error,
            "lock_token": "",
            "locked_until": None,
            "updated_at": now,
        }
        if response.succeeded:
            outcome = "succeeded"
            fields.update(status=D.SUCCEEDED, finished_at=now, next_attempt_at=None)
        elif retries <= len(schedule):
            outcome = "retry"
            wait = schedule[retries - 1] * self.jitter()
            fields.update(next_attempt_at=now + timedelta(seconds=wait))
        else:
            outcome = "dead-lettered"
            fields.update(status=D.FAILED, finished_at=now, next_attempt_at=None)
        with transaction.atomic():
            if outcome == "dead-lettered" and d.subscription_id is not None:
                # disable_if_failing locks the subscription; take it before the delivery's row,
                # in the order deleting a subscription takes them, so the two cannot deadlock.
                lock_subscription(d.subscription_id)
            n = Delivery.objects.filter(pk=d.pk, lock_token=mine, status=D.PENDING).update(**fields)
            # A delivery deleted meanwhile (its subscription or push config went) logs nothing.
            if n == 1 or Delivery.objects.filter(pk=d.pk).exists():
                Attempt.objects.create(
                    delivery=d,
                    number=d.attempts + 1,
                    started_at=started_at,
                    succeeded=response.succeeded,
                    status_code=response.status_code,
                    response_ms=response.response_ms,
                    error=response.error,
                    response_body=response.body,
                )
            if n != 1:
                return "superseded"
            if outcome == "dead-lettered":
                log.warning(
                    "webhook delivery %s to %s dead-lettered after %d attempts: %s",
                    d.webhook_id,
                    d.receiver_url,
                    d.attempts + 1,
                    response.error,
                )
                if d.subscription_id is not None:
                    disable_if_failing(d.subscription_id, now)
        return outcome


async def _start_of(r: httpx.Response) -> str:
    kept = b""
    async for chunk in r.aiter_bytes():
        kept += chunk
        if len(kept) >= RESPONSE_KEPT * 4:
            break
    return kept.decode("utf-8", errors="replace")[:RESPONSE_KEPT]


def _ms(started: float) -> int:
    return int((time.monotonic() - started) * 1000)


def lock_subscription(subscription_id: uuid.UUID) -> None:
    """Hold the subscription's row until the transaction ends (no-op on SQLite, which has one
    writer at a time anyway)."""
    list(Subscription.objects.select_for_update().filter(pk=subscription_id).values_list("pk"))


def disable_if_failing(subscription_id: uuid.UUID, now: datetime) -> bool:
    """Disable the subscription if its last WEBHOOKS_DISABLE_AFTER finished deliveries were
    all dead-lettered: it has failed for about a day that many times in a row. Its pending
    deliveries wait; enabling it again sends them. Call inside the dead-lettering
    transaction; the conditional update makes one caller the one that disables.

    The subscription's row is locked before the deliveries are read. Two deliveries
    dead-lettered at once by two workers otherwise each see the other still pending (its
    transaction not yet committed) and neither disables: CI saw both failed, the subscription
    on. Locked, the second to get here waits for the first to commit and then sees both."""
    n = settings.WEBHOOKS_DISABLE_AFTER
    if n < 1:
        return False
    lock_subscription(subscription_id)
    last = list(
        Delivery.objects.filter(subscription_id=subscription_id, finished_at__isnull=False)
        .order_by("-finished_at", "-id")
        .values_list("status", flat=True)[:n]
    )
    if len(last) < n or any(status != D.FAILED for status in last):
        return False
    reason = f"Its last {n} deliveries failed every attempt of the retry schedule."
    changed = Subscription.objects.filter(pk=subscription_id, enabled=True).update(
        enabled=False, disabled_reason=reason, updated_at=now
    )
    if changed != 1:
        return False
    s = Subscription.objects.select_related("owner").get(pk=subscription_id)
    events.record(
        Notice.DISABLED,
        payload={
            "subscription": str(s.pk),
            "host": addresses.host_of(s.url),
            "owner": s.owner.username if s.owner else None,
            "reason": reason,
        },
    )
    transaction.on_commit(lambda: tell_owner(s, reason))
    return True


def tell_owner(s: Subscription, reason: str) -> None:
    """A log line always; an email to the owner when they have an address."""
    owner = s.owner
    log.warning(
        "webhook subscription %s to %s disabled: %s (owner: %s)",
        s.pk,
        s.url,
        reason,
        owner.username if owner else "none",
    )
    if owner is None or not owner.email:
        return
    try:
        send_mail(
            "A webhook subscription was disabled",
            f"Your webhook subscription to {s.url} was disabled.\n\n{reason}\n\n"
            f"Enable it again in the admin ({settings.SITE_URL}/admin/webhooks/subscription/"
            f"{s.pk}/change/) once the receiver answers; the deliveries it missed are kept.",
            None,
            [owner.email],
        )
    except Exception:
        log.warning("could not email %s about subscription %s", owner.email, s.pk, exc_info=True)


outbox = Outbox()


def hold_deliveries(sender: Any, instance: Any, **kwargs: Any) -> None:
    """pre_delete of a receiver (a subscription or an A2A push config): its deliveries' rows
    locked before the deletion removes their attempts. A worker recording an attempt
    (Outbox.record) holds its delivery's row until it commits; without this lock the deletion
    removed the attempts it could see, waited for that row, then failed at commit on the
    attempt written meanwhile (the foreign key is checked then). With it, the deletion waits
    first and removes that attempt too. (Django sends pre_delete before any row is deleted.)"""
    field = "subscription" if isinstance(instance, Subscription) else "push_config"
    rows = Delivery.objects.select_for_update().filter(**{field: instance}).order_by("pk")
    list(rows.values_list("pk"))
