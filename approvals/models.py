"""API tokens: shown once, stored hashed."""

import hashlib
import secrets

from django.conf import settings
from django.db import models


def digest(raw: str) -> str:
    return hashlib.sha256(raw.encode()).hexdigest()


class ApiToken(models.Model):
    user = models.ForeignKey(settings.AUTH_USER_MODEL, models.CASCADE, related_name="api_tokens")
    name = models.CharField(max_length=100, blank=True)
    digest = models.CharField(max_length=64, unique=True, editable=False)
    prefix = models.CharField(
        max_length=12, editable=False, help_text="The token's first characters"
    )
    created_at = models.DateTimeField(auto_now_add=True)
    last_used_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["-created_at"]

    def __str__(self) -> str:
        return f"{self.prefix}… ({self.user})"

    @classmethod
    def issue(cls, user: object, name: str = "") -> tuple["ApiToken", str]:
        """A new token; the raw value is returned once and never stored."""
        raw = "gw_" + secrets.token_urlsafe(32)
        token = cls.objects.create(user=user, name=name, digest=digest(raw), prefix=raw[:10])
        return token, raw
