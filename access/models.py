"""API tokens (shown once, stored hashed, scoped, revocable), reviewers' passkeys, the revocation
counter, and the rate limits' counters."""

import hashlib
import secrets
from datetime import datetime

from django.conf import settings
from django.db import models
from django.utils import timezone


def digest(raw: str) -> str:
    return hashlib.sha256(raw.encode()).hexdigest()


class Scope(models.TextChoices):
    """What a token may be used for (access.scopes says which endpoint needs which). A
    browser session has no scopes: its user's permissions alone apply."""

    RUNS = "runs", "start runs and read its own runs"
    DECIDE = "decide", "decide suspensions, answer questions and replies, extend deadlines"
    READ = "read", "read every run, suspension and event"
    ADMIN = "admin", "the staff APIs: webhooks and metrics"


ALL_SCOPES = [s.value for s in Scope]


class ApiToken(models.Model):
    user = models.ForeignKey(settings.AUTH_USER_MODEL, models.CASCADE, related_name="api_tokens")
    name = models.CharField(max_length=100, blank=True)
    digest = models.CharField(max_length=64, unique=True, editable=False)
    prefix = models.CharField(
        max_length=12, editable=False, help_text="The token's first characters"
    )
    # A list of Scope values; a token made before scopes existed got them all (migration 0002).
    scopes = models.JSONField(default=list)
    expires_at = models.DateTimeField(null=True, blank=True)
    # Revoking keeps the row, so the trail's TOKEN_* events and the admin still name the token.
    revoked_at = models.DateTimeField(null=True, blank=True)
    revoked_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, models.SET_NULL, null=True, blank=True, related_name="+"
    )
    created_at = models.DateTimeField(auto_now_add=True)
    last_used_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["-created_at"]
        db_table = "approvals_apitoken"  # created by the approvals app, where tokens began

    def __str__(self) -> str:
        label = f" {self.name}" if self.name else ""
        return f"{self.prefix}…{label} ({self.user})"

    @classmethod
    def issue(
        cls,
        user: object,
        name: str = "",
        scopes: list[str] | None = None,
        expires_at: datetime | None = None,
    ) -> tuple["ApiToken", str]:
        """A new token (every scope unless `scopes` names some); the raw value is returned
        once and never stored. Not audited: access.tokens.create is the audited way."""
        raw = "gw_" + secrets.token_urlsafe(32)
        token = cls.objects.create(
            user=user,
            name=name,
            digest=digest(raw),
            prefix=raw[:10],
            scopes=sorted(ALL_SCOPES if scopes is None else set(scopes)),
            expires_at=expires_at,
        )
        return token, raw

    def refusal(self, now: datetime | None = None) -> str | None:
        """Why the token may no longer be used, or None while it may."""
        now = now or timezone.now()
        if self.revoked_at is not None:
            return f"The bearer token was revoked at {self.revoked_at.isoformat()}."
        if self.expires_at is not None and self.expires_at <= now:
            return f"The bearer token expired at {self.expires_at.isoformat()}."
        return None

    @property
    def status(self) -> str:
        refused = self.refusal()
        if refused is None:
            return "active"
        return "revoked" if self.revoked_at is not None else "expired"


class RevocationCounter(models.Model):
    """One row (REVOCATION_COUNTER): how many credentials have been taken away so far. Triggers
    (access.revocation_triggers) add one in the very transaction that revokes, expires
    sooner or deletes a token, deactivates or deletes a user, or deletes a session (a logout);
    access.clearance reads it after the events it is about to send, and checks the
    credentials again when it has moved."""

    count = models.BigIntegerField(default=0)

    class Meta:
        db_table = "approvals_revocationcounter"  # created by the approvals app

    def __str__(self) -> str:
        return f"{self.count} revocations"


REVOCATION_COUNTER = 1  # the primary key of RevocationCounter's one row


class RateCounter(models.Model):
    """One fixed-window counter of access.ratelimits when there is no Redis: the number of
    hits under `key` until `expires_at` (seconds since the epoch), after which it starts over."""

    key = models.CharField(max_length=255, primary_key=True)
    hits = models.PositiveIntegerField(default=0)
    expires_at = models.FloatField()

    class Meta:
        db_table = "approvals_ratecounter"  # created by the approvals app

    def __str__(self) -> str:
        return f"{self.key}: {self.hits}"


class Passkey(models.Model):
    """A reviewer's WebAuthn credential (a passkey), registered on their account page and
    asked for when they approve a `step_up` request (access.passkeys). Only the public key
    is kept; the sign count lets a cloned authenticator be noticed."""

    user = models.ForeignKey(settings.AUTH_USER_MODEL, models.CASCADE, related_name="passkeys")
    name = models.CharField(max_length=100)
    # The credential id, base64url without padding, as the browser and the events name it.
    credential_id = models.CharField(max_length=1400, unique=True)
    public_key = models.BinaryField()
    sign_count = models.PositiveBigIntegerField(default=0)
    transports = models.JSONField(default=list, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)
    last_used_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["created_at"]

    def __str__(self) -> str:
        return f"{self.name} ({self.user})"
