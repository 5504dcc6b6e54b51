"""Standard Webhooks secrets and signatures; the `standardwebhooks` package does the signing."""

import base64
import binascii
import math
import secrets
from datetime import datetime

from standardwebhooks import Webhook

PREFIX = "whsec_"
SECRET_BYTES = 32


def new_secret() -> str:
    """A fresh secret in the specification's format: whsec_ and 32 random bytes in base64."""
    return PREFIX + base64.b64encode(secrets.token_bytes(SECRET_BYTES)).decode()


def secret_error(value: str) -> str | None:
    """Why `value` cannot be a subscription's secret, or None when it can."""
    if not value.startswith(PREFIX):
        return "A Standard Webhooks secret: whsec_ followed by base64 (leave it out to get one)."
    try:
        raw = base64.b64decode(value[len(PREFIX) :], validate=True)
    except (binascii.Error, ValueError):
        return "The part after whsec_ is not base64."
    if not 24 <= len(raw) <= 64:
        return f"The secret must be 24 to 64 bytes before base64 (this is {len(raw)})."
    return None


def signed_headers(secret: str, webhook_id: str, body: str, now: datetime) -> dict[str, str]:
    """The three headers a receiver verifies with `Webhook(secret).verify(body, headers)`.
    `webhook_id` stays the same for every attempt and replay of one delivery, so receivers can
    dedupe on it; the timestamp is the attempt's own, as the specification asks."""
    return {
        "webhook-id": webhook_id,
        "webhook-timestamp": str(math.floor(now.timestamp())),
        "webhook-signature": Webhook(secret).sign(webhook_id, now, body),
    }
