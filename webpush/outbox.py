"""Sending a push: one POST to the device's push service through pywebpush (the payload
encrypted to the subscription's keys, aes128gcm, RFC 8291; signed with the server's VAPID
key, RFC 8292). The claim, the lease, the retry schedule and the attempt log are the shared
outbox's (agents.delivery.outbox).

The push service's answer decides the rest: 201 finishes a push; 404 or 410 says the
subscription is gone, so the push fails at once and the device is removed (audited); any
other refusal the service will repeat (400, 401, 403, 413) fails the push at once; a 429
waits at least its Retry-After; anything else (5xx, a timeout, a refused connection) is tried
again after the next step of RETRY_SCHEDULE, and fails when it runs out.

A notice whose group no longer waits is not sent (skipped). A closing push waits until the
device's notice of that group was sent (so it never arrives first), and is skipped when none
was. The push service holds a message for its TTL while the device is offline; its Topic is
the group's, so a closing push replaces a notice the device has not fetched yet.
"""

import json
import time
from datetime import datetime, timedelta

from django.conf import settings

from agents.delivery import outbox as shared
from agents.delivery.outbox import Result
from agents.models import Suspension
from webpush import devices, keys
from webpush.models import Device, Push, PushAttempt

# Seconds before each retry; a push fails after len(RETRY_SCHEDULE) + 1 attempts.
RETRY_SCHEDULE = [5, 30, 120, 600, 1800]
LEASE = timedelta(seconds=60)  # longer than a POST may take (WEBPUSH_TIMEOUT_SECONDS)
GONE = {404, 410}
REFUSED = {400, 401, 403, 413}
# How long a push service keeps a notice for a device that is offline: a request with no
# deadline is worth a day; one with a deadline, until it.
TTL_SECONDS = 24 * 3600
BODY_KEPT = 500


class Outbox(shared.Outbox):
    model = Push
    attempt_model = PushAttempt
    attempt_of = "push"
    task = "webpush.tasks.deliver"
    send_retries = True

    def lease(self) -> timedelta:
        return LEASE

    def schedule(self) -> list[float]:
        return list(RETRY_SCHEDULE)

    def load(self, pk: int) -> Push:
        return Push.objects.select_related("device").get(pk=pk)

    def held(self, push: Push) -> str:
        if push.kind == Push.Kind.CLOSED:
            notices = Push.objects.filter(group=push.group, device_id=push.device_id).exclude(
                kind=Push.Kind.CLOSED
            )
            if notices.filter(status=Push.Status.PENDING).exists():
                return "waiting"  # the sweep hands it out again (enqueue_due)
            if notices.filter(status=Push.Status.SUCCEEDED).exists():
                return ""
        elif Suspension.objects.filter(
            group=push.group, status=Suspension.Status.PENDING, ignored_at__isnull=True
        ).exists():
            return ""
        Push.objects.filter(pk=push.pk).update(status=Push.Status.SKIPPED, finished_at=self.clock())
        return Push.Status.SKIPPED

    def deliver(self, push: Push, now: datetime) -> Result:
        # pywebpush (with requests and its crypto, some 400 modules and 38 MB) is imported by
        # the worker that sends a push, not by every process that loads this module through
        # webpush.fanout (the web server's nudge, beat).
        import requests
        from pywebpush import WebPushException, webpush

        device = push.device
        started = time.monotonic()
        try:
            response = webpush(
                subscription_info={
                    "endpoint": device.endpoint,
                    "keys": {"p256dh": device.p256dh, "auth": device.auth},
                },
                data=json.dumps(push.payload, ensure_ascii=False),
                vapid_private_key=keys.vapid(),
                vapid_claims={"sub": keys.subject()},
                ttl=ttl(push, now),
                timeout=settings.WEBPUSH_TIMEOUT_SECONDS,
                # RFC 8030: a request is worth waking the device for; the Topic (at most 32
                # base64url characters) lets a later push of the group replace this one.
                headers={"Urgency": "high", "Topic": push.group.hex},
            )
        except WebPushException as e:
            status = e.status_code
            body = getattr(e.response, "text", "") or ""
            retry_after = getattr(e.response, "headers", {}).get("Retry-After", "0")
            return Result(
                False,
                status_code=status,
                response_ms=_ms(started),
                error=f"the push service answered {status}",
                body=body[:BODY_KEPT],
                permanent=status in GONE or status in REFUSED,
                retry_after=float(retry_after) if str(retry_after).isdigit() else 0.0,
            )
        except (requests.RequestException, OSError) as e:
            return Result(False, response_ms=_ms(started), error=f"{type(e).__name__}: {e}")
        Device.objects.filter(pk=device.pk).update(last_push_at=now)
        return Result(True, status_code=response.status_code, response_ms=_ms(started))

    def ending(self, push: Push) -> None:
        # The device's row before the push's, in the order devices.remove takes them (its
        # delete cascades to the pushes).
        Device.objects.select_for_update().filter(pk=push.device_id).first()

    def ended(self, push: Push, now: datetime, result: Result) -> None:
        if result.status_code in GONE:
            devices.expire(push.device_id, result.status_code)


def ttl(push: Push, now: datetime) -> int:
    """Seconds the push service may hold the push for an offline device."""
    if push.kind == Push.Kind.CLOSED:
        return TTL_SECONDS
    deadline = (
        Suspension.objects.filter(group=push.group, expires_at__isnull=False)
        .order_by("expires_at")
        .values_list("expires_at", flat=True)
        .first()
    )
    if deadline is None:
        return TTL_SECONDS
    return max(0, min(TTL_SECONDS, int((deadline - now).total_seconds())))


def _ms(started: float) -> int:
    return int((time.monotonic() - started) * 1000)


outbox = Outbox()
enqueue = outbox.enqueue
enqueue_due = outbox.enqueue_due
send = outbox.send
