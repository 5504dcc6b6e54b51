"""Checking a decision's signed receipt with the gateway's public keys alone.

A receipt is a compact JWS signed with EdDSA (Ed25519) by the gateway; its header names the
key (`kid`) among those the gateway publishes at /.well-known/jwks.json. Check it before
acting on a decision: the signature says the gateway decided so, and the claims say what
was decided (the request, its outcome, and the SHA-256 of the arguments approved).
"""

import base64
import hashlib
import json
from typing import Any

from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PublicKey


class ReceiptInvalid(Exception):
    """A receipt that does not verify, or does not say what the request says."""


def _unb64(text: str) -> bytes:
    return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))


def canonical_hash(value: Any) -> str:
    """The gateway's args hash: SHA-256 of the JSON with sorted keys and no spaces."""
    text = json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return hashlib.sha256(text.encode()).hexdigest()


def verify(token: str, jwks: dict[str, Any]) -> dict[str, Any]:
    """The claims of the receipt `token` when a key of `jwks` (the JSON of
    /.well-known/jwks.json) signed it; raises ReceiptInvalid otherwise."""
    try:
        header_b64, payload_b64, signature_b64 = token.split(".")
        header = json.loads(_unb64(header_b64))
        signature = _unb64(signature_b64)
    except (ValueError, AttributeError) as e:
        raise ReceiptInvalid("not a compact JWS") from e
    if header.get("alg") != "EdDSA":
        raise ReceiptInvalid(f"unexpected alg {header.get('alg')!r}")
    keys = [
        k
        for k in jwks.get("keys", [])
        if k.get("kid") == header.get("kid") and k.get("kty") == "OKP" and k.get("crv") == "Ed25519"
    ]
    if not keys:
        raise ReceiptInvalid(f"no published key {header.get('kid')!r}")
    try:
        Ed25519PublicKey.from_public_bytes(_unb64(keys[0]["x"])).verify(
            signature, f"{header_b64}.{payload_b64}".encode()
        )
    except (InvalidSignature, ValueError) as e:
        raise ReceiptInvalid("the signature does not match") from e
    claims: dict[str, Any] = json.loads(_unb64(payload_b64))
    return claims
