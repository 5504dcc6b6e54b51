"""The server's VAPID key (RFC 8292) and what it signs with: WEBPUSH_VAPID_PRIVATE_KEY when
set, else a key made on first use and kept in the database (webpush.models.VapidKey says
why), sealed with Fernet under a key derived from SECRET_KEY (or one of its fallbacks)."""

import base64
import hashlib
from functools import lru_cache
from urllib.parse import urlsplit

from cryptography.fernet import Fernet, MultiFernet
from cryptography.hazmat.primitives.serialization import Encoding, PublicFormat
from django.conf import settings
from django.core.exceptions import ImproperlyConfigured
from django.db import IntegrityError, transaction
from py_vapid import Vapid

from webpush.models import VapidKey


def _fernet() -> MultiFernet:
    secrets = [settings.SECRET_KEY, *getattr(settings, "SECRET_KEY_FALLBACKS", [])]
    return MultiFernet(
        [
            Fernet(base64.urlsafe_b64encode(hashlib.sha256(f"webpush:{s}".encode()).digest()))
            for s in secrets
        ]
    )


@lru_cache(maxsize=4)
def _parsed(text: str) -> Vapid:
    """A VAPID key from PEM, or from base64url (the raw 32-byte scalar or DER), as
    `vapid --gen` and web-push's generate-vapid-keys print it."""
    try:
        if "-----BEGIN" in text:
            return Vapid.from_pem(text.encode())
        return Vapid.from_string(text.strip())
    except Exception as e:
        raise ImproperlyConfigured(
            "WEBPUSH_VAPID_PRIVATE_KEY is not a P-256 private key (PEM, or base64url)"
        ) from e


@lru_cache(maxsize=4)
def _unsealed(sealed: str) -> Vapid:
    return Vapid.from_pem(_fernet().decrypt(sealed.encode()))


def _kept() -> Vapid:
    """The key kept in the database, made now if there is none (one row, pk 1: two machines
    making it at once keep the first)."""
    row = VapidKey.objects.filter(pk=1).first()
    if row is None:
        made = Vapid()
        made.generate_keys()
        try:
            with transaction.atomic():
                row = VapidKey.objects.create(
                    pk=1, private_sealed=_fernet().encrypt(made.private_pem()).decode()
                )
        except IntegrityError:
            row = VapidKey.objects.get(pk=1)
    return _unsealed(row.private_sealed)


def vapid() -> Vapid:
    """The key every push is signed with."""
    configured = settings.WEBPUSH_VAPID_PRIVATE_KEY
    return _parsed(configured) if configured else _kept()


def public_key() -> str:
    """The public half as the browser's applicationServerKey wants it: the uncompressed P-256
    point, base64url without padding."""
    raw = vapid().public_key.public_bytes(Encoding.X962, PublicFormat.UncompressedPoint)
    return base64.urlsafe_b64encode(raw).rstrip(b"=").decode()


def subject() -> str:
    """The VAPID `sub` claim: who the push services may contact about these pushes
    (WEBPUSH_VAPID_SUBJECT; else SITE_URL when it is https, else the From address)."""
    if settings.WEBPUSH_VAPID_SUBJECT:
        return str(settings.WEBPUSH_VAPID_SUBJECT)
    if urlsplit(settings.SITE_URL).scheme == "https":
        return str(settings.SITE_URL).rstrip("/")
    address = str(settings.DEFAULT_FROM_EMAIL)
    if "<" in address:
        address = address.split("<", 1)[1].rstrip("> ")
    return f"mailto:{address}"
