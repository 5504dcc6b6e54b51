"""Sending webhooks: a delivery POSTed (signed per Standard Webhooks, or with an A2A push
config's authentication) within a deadline. The claim, the lease, the retry schedule and the
attempt log are the shared outbox's (agents.delivery.outbox); a subscription whose deliveries
keep dying is disabled and its owner told.

httpx (which brings rich) and the A2A push format (a2a_server.notifications: the A2A SDK,
protobuf) are imported by the functions that POST and build a push, not with this module:
every worker imports it at start (the tasks module, the sweep), and one that never sends a
webhook never needs them (issue 42).
"""

from __future__ import annotations

import asyncio
import json
import logging
import random
import time
import uuid
from collections.abc import Callable
from datetime import datetime, timedelta
from typing import TYPE_CHECKING, Any

from django.conf import settings
from django.core.mail import send_mail
from django.db import transaction
from django.db.models import Q
from django.utils import timezone

from agents import events
from agents.delivery import outbox as shared
from agents.delivery.outbox import Result
from infra import addresses
from webhooks.models import Attempt, Delivery, Notice, Subscription
from webhooks.signing import signed_headers

if TYPE_CHECKING:
    import httpx

log = logging.getLogger(__name__)

D = Delivery.Status
RESPONSE_KEPT = 500  # characters of a receiver's answer kept in the log
ERROR_KEPT = 1000
USER_AGENT = "approval-gateway-webhooks/1"
# How long a queued delivery is locked for its task (webhooks.fanout, webhooks.actions).
QUEUED_GRACE = shared.QUEUED_GRACE


class Outbox(shared.Outbox):
    """Sends one delivery at a time. The clock, the jitter and the HTTP transport are
    injectable; by default the real ones."""

    model = Delivery
    attempt_model = Attempt
    task = "webhooks.tasks.deliver"

    def __init__(
        self,
        clock: Callable[[], datetime] = timezone.now,
        transport: httpx.AsyncBaseTransport | None = None,
        jitter: Callable[[], float] = lambda: random.uniform(0.75, 1.25),
    ) -> None:
        super().__init__(clock, jitter)
        self.transport = transport

    def lease(self) -> timedelta:
        """How long an attempt holds its delivery: past it, the sweep lets another worker try
        (the first may then have sent it too: receivers dedupe on webhook-id). Longer than
        the POST may last (WEBHOOKS_DELIVERY_TIMEOUT_SECONDS), with time to resolve the
        receiver's name before it and record the attempt after it."""
        return timedelta(seconds=settings.WEBHOOKS_DELIVERY_TIMEOUT_SECONDS + 5)

    def schedule(self) -> list[float]:
        return list(settings.WEBHOOKS_RETRY_SCHEDULE)

    def load(self, pk: int) -> Delivery:
        return Delivery.objects.select_related("event", "subscription", "push_config").get(pk=pk)

    def held(self, d: Delivery) -> str:
        # It waits, pending, for the subscription to be enabled again.
        return "disabled" if d.subscription is not None and not d.subscription.enabled else ""

    def due(self) -> Q:
        return Q(subscription__isnull=True) | Q(subscription__enabled=True)

    def failures(self, d: Delivery) -> int:
        # Failed attempts since the delivery was made or last replayed (webhooks.actions).
        return d.retries

    def fields(self, d: Delivery, result: Result) -> dict[str, Any]:
        return {
            "retries": d.retries + (0 if result.succeeded else 1),
            "last_status_code": result.status_code,
            "last_response_ms": result.response_ms,
            "updated_at": self.clock(),
        }

    def deliver(self, d: Delivery, now: datetime) -> Result:
        url, body, headers = self.request_for(d, now)
        return self.post(url, body, headers)

    def ending(self, d: Delivery) -> None:
        if d.subscription_id is not None:
            # disable_if_failing locks the subscription; take it before the delivery's row,
            # in the order deleting a subscription takes them, so the two cannot deadlock.
            lock_subscription(d.subscription_id)

    def ended(self, d: Delivery, now: datetime, result: Result) -> None:
        log.warning(
            "webhook delivery %s to %s dead-lettered after %d attempts: %s",
            d.webhook_id,
            d.receiver_url,
            d.attempts + 1,
            result.error,
        )
        if d.subscription_id is not None:
            disable_if_failing(d.subscription_id, now)

    def request_for(self, d: Delivery, now: datetime) -> tuple[str, str, dict[str, str]]:
        """URL, body and headers of the delivery's POST."""
        if d.subscription is not None:
            body = json.dumps(d.event.as_message(), separators=(",", ":"), ensure_ascii=False)
            headers = {
                "Content-Type": "application/json",
                **signed_headers(d.subscription.secret, d.webhook_id, body, now),
            }
            return d.subscription.url, body, headers
        from a2a_server import notifications

        body = json.dumps(
            notifications.push_body(d.event), separators=(",", ":"), ensure_ascii=False
        )
        return d.push_config.url, body, notifications.push_headers(d.push_config)

    def post(self, url: str, body: str, headers: dict[str, str]) -> Result:
        """POST to the address the URL's host resolves to, after the address check; no
        redirects (a redirect could point inside); each timeout WEBHOOKS_TIMEOUT_SECONDS, and
        the whole POST at most WEBHOOKS_DELIVERY_TIMEOUT_SECONDS (a failed attempt past it)."""
        try:
            target = addresses.target(url)
        except addresses.Refused as e:
            return Result(False, error=f"Refused: {e}")
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
    ) -> Result:
        import httpx

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
            return Result(False, status, _ms(started), error)
        except (httpx.HTTPError, httpx.InvalidURL) as e:
            return Result(False, status, _ms(started), f"{type(e).__name__}: {e}"[:ERROR_KEPT])
        ms = _ms(started)
        if 200 <= r.status_code < 300:
            return Result(True, r.status_code, ms, "", text)
        return Result(False, r.status_code, ms, f"HTTP {r.status_code}", text)


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
enqueue = outbox.enqueue
enqueue_due = outbox.enqueue_due


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
