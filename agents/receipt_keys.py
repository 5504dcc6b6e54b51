"""The keys that sign receipts: made on first use, rotated, published as a JWKS.

Ed25519 keys (RFC 8037), in the database (agents.models.ReceiptKey says why), the private
half sealed with Fernet under a key derived from SECRET_KEY (or one of
SECRET_KEY_FALLBACKS, so the secret key can itself be rotated the Django way). A process
keeps the current key it read for RECEIPT_KEY_CACHE_SECONDS: after a rotation another
machine may sign with the previous key for that long, which stays valid, as it is still
published.
"""

import base64
import hashlib
import time
from dataclasses import dataclass
from typing import Any

from cryptography.fernet import Fernet, InvalidToken, MultiFernet
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
from cryptography.hazmat.primitives.serialization import Encoding, PublicFormat
from django.conf import settings
from django.db import DEFAULT_DB_ALIAS, IntegrityError, connections, transaction

from agents import events
from agents.models import Event, ReceiptKey


@dataclass(frozen=True)
class SigningKey:
    kid: str
    private: Ed25519PrivateKey


_cached: tuple[float, SigningKey] | None = None


def _b64(raw: bytes) -> str:
    return base64.urlsafe_b64encode(raw).rstrip(b"=").decode()


def _fernet() -> MultiFernet:
    secrets = [settings.SECRET_KEY, *getattr(settings, "SECRET_KEY_FALLBACKS", [])]
    return MultiFernet(
        [
            Fernet(base64.urlsafe_b64encode(hashlib.sha256(f"receipts:{s}".encode()).digest()))
            for s in secrets
        ]
    )


def public_jwk(private: Ed25519PrivateKey, kid: str) -> dict[str, str]:
    raw = private.public_key().public_bytes(Encoding.Raw, PublicFormat.Raw)
    return {
        "kty": "OKP",
        "crv": "Ed25519",
        "x": _b64(raw),
        "kid": kid,
        "alg": "EdDSA",
        "use": "sig",
    }


def _make(previous: str | None = None) -> ReceiptKey:
    """A new key row, current; the caller has retired the previous one in its transaction
    (`previous`, whose kid RECEIPT_KEY_ROTATED records; the first key, made with the tables,
    records none). The kid is the key's RFC 7638 thumbprint: it names the key alone."""
    private = Ed25519PrivateKey.generate()
    jwk = public_jwk(private, "")
    thumb = hashlib.sha256(f'{{"crv":"Ed25519","kty":"OKP","x":"{jwk["x"]}"}}'.encode()).digest()
    kid = _b64(thumb)
    row = ReceiptKey.objects.create(
        kid=kid,
        public_jwk={**jwk, "kid": kid},
        private_sealed=_fernet().encrypt(private.private_bytes_raw()).decode(),
        current=True,
    )
    if previous is not None:
        payload = {"kid": kid, "previous": previous or None}
        events.record(Event.Type.RECEIPT_KEY_ROTATED, payload=payload)
    return row


def forget() -> None:
    """Read the current key again at the next signing."""
    global _cached
    _cached = None


def rotate() -> str:
    """Make a new current key (manage.py rotate_receipt_key); the old ones stay published.
    Returns the new kid."""
    with transaction.atomic():
        old = list(ReceiptKey.objects.select_for_update().filter(current=True))
        ReceiptKey.objects.filter(current=True).update(current=False)
        row = _make(old[0].kid if old else "")
    forget()
    return row.kid


def current() -> SigningKey:
    """The key that signs now: read at most every RECEIPT_KEY_CACHE_SECONDS, made on first
    use (two machines making it at once: the unique current key lets one win, the other
    reads it)."""
    global _cached
    now = time.monotonic()
    if _cached is not None and now - _cached[0] < settings.RECEIPT_KEY_CACHE_SECONDS:
        return _cached[1]
    row = ReceiptKey.objects.filter(current=True).first()
    if row is None:
        try:
            with transaction.atomic():
                row = _make()
        except IntegrityError:
            row = ReceiptKey.objects.get(current=True)
    try:
        raw = _fernet().decrypt(row.private_sealed.encode())
    except InvalidToken as e:
        raise RuntimeError(
            "the receipt key cannot be opened with SECRET_KEY (or SECRET_KEY_FALLBACKS): "
            "every machine must share the secret key the key was sealed under"
        ) from e
    key = SigningKey(row.kid, Ed25519PrivateKey.from_private_bytes(raw))
    _cached = (now, key)
    return key


def made_with_the_tables(using: str = DEFAULT_DB_ALIAS, **kwargs: Any) -> None:
    """post_migrate: the first key, made when the tables are (`migrate` on first start), so
    the JWKS is published before the first decision and no decision pays for making it."""
    if ReceiptKey._meta.db_table not in connections[using].introspection.table_names():
        return  # migrated back to before the receipts
    if not ReceiptKey.objects.using(using).filter(current=True).exists():
        try:
            with transaction.atomic(using=using):
                _make()
        except IntegrityError:
            pass  # another machine made it meanwhile


def jwks() -> dict[str, list[dict[str, str]]]:
    """Every key's public half, newest first: what /.well-known/jwks.json serves."""
    return {"keys": [k.public_jwk for k in ReceiptKey.objects.order_by("-created_at", "-id")]}
