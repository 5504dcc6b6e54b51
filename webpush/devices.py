"""Reviewers' devices: a push subscription kept (per user, at most MAX_DEVICES each),
removed from the Account page or when its push service says it is gone; each change audited
(PUSH_DEVICE_ADDED, PUSH_DEVICE_REMOVED) in the transaction that makes it.

An endpoint is a URL the gateway will POST to, sent by a browser: it is taken only at a push
service named in WEBPUSH_PUSH_SERVICES, over https, so a subscription cannot point the server
anywhere else. The audit records the endpoint's host, not the endpoint (a capability URL).
"""

import base64
import binascii
import ipaddress
from typing import Any
from urllib.parse import urlsplit

from django.conf import settings
from django.db import transaction
from django.db.models import TextChoices

from agents import events
from webpush.models import Device

MAX_DEVICES = 20
MAX_ENDPOINT_CHARS = 1000
MAX_NAME_CHARS = 100


class Notice(TextChoices):
    """The Event types this module records (agents.models.Event.type holds any string)."""

    ADDED = "PUSH_DEVICE_ADDED"
    REMOVED = "PUSH_DEVICE_REMOVED"


class Refused(Exception):
    """A subscription that is not kept; `detail` says why, for the reviewer."""

    def __init__(self, detail: str) -> None:
        super().__init__(detail)
        self.detail = detail


def _loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def check_endpoint(endpoint: Any) -> str:
    """The endpoint, if it is an https URL at a push service of WEBPUSH_PUSH_SERVICES (a name
    there matches itself and its subdomains; a loopback name listed there, a local stand-in,
    may be plain http). Raises Refused."""
    if not isinstance(endpoint, str) or not endpoint or len(endpoint) > MAX_ENDPOINT_CHARS:
        raise Refused("The subscription has no endpoint the gateway can use.")
    try:
        parts = urlsplit(endpoint)
        parts.port  # noqa: B018 - raises ValueError for a bad port
    except ValueError as e:
        raise Refused("The subscription's endpoint is not a URL.") from e
    host = (parts.hostname or "").lower()
    if parts.username is not None or parts.password is not None or not host:
        raise Refused("The subscription's endpoint is not a push service's URL.")
    listed = [name.lower().lstrip(".") for name in settings.WEBPUSH_PUSH_SERVICES]
    if not any(host == name or host.endswith(f".{name}") for name in listed):
        raise Refused(
            f"This browser's push service ({host}) is not one this gateway sends to "
            "(WEBPUSH_PUSH_SERVICES)."
        )
    if parts.scheme != "https" and not (parts.scheme == "http" and _loopback(host)):
        raise Refused("The subscription's endpoint must be an https URL.")
    return endpoint


def _key(value: Any, size: int, what: str) -> str:
    """A base64url key of `size` bytes, as the browser's PushSubscription.toJSON gives it."""
    if isinstance(value, str) and len(value) < 200:
        try:
            raw = base64.urlsafe_b64decode(value + "=" * (-len(value) % 4))
        except (binascii.Error, ValueError):
            raw = b""
        if len(raw) == size and (size != 65 or raw[0] == 4):
            return value.rstrip("=")
    raise Refused(f"The subscription's {what} is not a key the gateway can use.")


def guess_name(user_agent: str) -> str:
    """ "Chrome on Android", from a User-Agent header, for a device the reviewer did not name."""
    browsers = (("Edg/", "Edge"), ("Firefox/", "Firefox"), ("Chrome/", "Chrome"))
    browser = next((b for mark, b in browsers if mark in user_agent), "")
    if not browser and "Safari/" in user_agent:
        browser = "Safari"
    systems = (
        ("Android", "Android"),
        ("iPhone", "iPhone"),
        ("iPad", "iPad"),
        ("Windows", "Windows"),
        ("Mac OS X", "macOS"),
        ("Linux", "Linux"),
    )
    system = next((s for mark, s in systems if mark in user_agent), "")
    return " on ".join(p for p in (browser or "Browser", system) if p)


def _audit(device: Device, via: str) -> dict[str, Any]:
    return {
        "user": device.user.get_username(),
        "device": device.pk,
        "name": device.name,
        "push_service": urlsplit(device.endpoint).hostname,
        "via": via,
    }


def add(user: Any, subscription: Any, name: str) -> Device:
    """Keep `user`'s subscription (PushSubscription.toJSON: endpoint, keys p256dh and auth),
    with its PUSH_DEVICE_ADDED event, in one transaction. The same subscription sent again
    is updated; one another user had on this browser becomes this user's (the browser keeps
    one per site), its removal audited too. Raises Refused."""
    if not isinstance(subscription, dict) or not isinstance(subscription.get("keys"), dict):
        raise Refused("Send the browser's push subscription.")
    endpoint = check_endpoint(subscription.get("endpoint"))
    keys = subscription["keys"]
    p256dh = _key(keys.get("p256dh"), 65, "public key")
    auth = _key(keys.get("auth"), 16, "auth secret")
    name = " ".join(str(name or "").split())[:MAX_NAME_CHARS] or "This device"
    with transaction.atomic():
        found = Device.objects.select_for_update().filter(endpoint=endpoint).first()
        if found is not None and found.user_id == user.pk:
            found.p256dh, found.auth, found.name = p256dh, auth, name
            found.save(update_fields=["p256dh", "auth", "name"])
            return found
        if found is not None:
            payload = _audit(found, "signed in as another user on this browser")
            found.delete()
            events.record(Notice.REMOVED, actor=user, payload=payload)
        if Device.objects.filter(user=user).count() >= MAX_DEVICES:
            raise Refused(f"You have {MAX_DEVICES} devices: remove one first.")
        device = Device.objects.create(
            user=user, endpoint=endpoint, p256dh=p256dh, auth=auth, name=name
        )
        events.record(Notice.ADDED, actor=user, payload=_audit(device, "page"))
    return device


def remove(user: Any, device_id: int) -> bool:
    """Remove one of `user`'s devices, with its PUSH_DEVICE_REMOVED event; False when they
    have no such device."""
    with transaction.atomic():
        found = Device.objects.select_for_update().filter(pk=device_id, user=user).first()
        if found is None:
            return False
        payload = _audit(found, "page")
        found.delete()
        events.record(Notice.REMOVED, actor=user, payload=payload)
    return True


def expire(device_id: int, status_code: int | None) -> None:
    """The push service says the subscription is gone (404, 410): the device is removed, in
    the caller's transaction, with its PUSH_DEVICE_REMOVED event (no actor: the gateway)."""
    found = Device.objects.select_for_update().filter(pk=device_id).first()
    if found is None:
        return
    payload = _audit(found, f"the push service answered {status_code}")
    found.delete()
    events.record(Notice.REMOVED, payload=payload)
