"""A person at the identity provider: the gateway user that an issuer's subject signs in as."""

from django.conf import settings
from django.db import models

# OpenID Connect Core 2: a subject is at most 255 ASCII characters, unique within its issuer.
MAX_SUBJECT = 255


class Identity(models.Model):
    """The key of a person who signs in with OpenID Connect: the issuer and its `sub`, stable
    for that person whatever their email or name becomes. Never an email alone: an address
    that moves to someone else at the provider does not take the account with it."""

    user = models.ForeignKey(settings.AUTH_USER_MODEL, models.CASCADE, related_name="identities")
    issuer = models.CharField(max_length=255)
    subject = models.CharField(max_length=MAX_SUBJECT)
    # What the last sign-in said, for the admin: the verified email (or none) and when.
    email = models.CharField(max_length=254, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)
    signed_in_at = models.DateTimeField()

    class Meta:
        verbose_name_plural = "identities"
        constraints = [
            models.UniqueConstraint(fields=["issuer", "subject"], name="sso_identity_subject"),
            # One identity per user and issuer: a second subject never joins an account.
            models.UniqueConstraint(fields=["user", "issuer"], name="sso_identity_user"),
        ]

    def __str__(self) -> str:
        return f"{self.subject} at {self.issuer}"
