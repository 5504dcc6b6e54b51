"""A software authenticator for the server's tests of passkeys: it answers the options the
gateway sends (access.passkeys) as a browser with a platform authenticator would, with a P-256
key of its own, so a test can register a passkey, approve with it, and forge or replay an
answer. The browser tests use Chromium's virtual authenticator instead (tests/e2e)."""

import hashlib
import json
import os
import struct
from typing import Any

from cryptography.hazmat.primitives import hashes
from cryptography.hazmat.primitives.asymmetric import ec
from webauthn.helpers import base64url_to_bytes, bytes_to_base64url, encode_cbor

UP_UV = 0x01 | 0x04  # user present, user verified
ATTESTED = 0x40  # attested credential data follows


class Device:
    def __init__(self, rp_id: str, origin: str) -> None:
        self.rp_id = rp_id
        self.origin = origin
        self.key = ec.generate_private_key(ec.SECP256R1())
        self.credential_id = os.urandom(16)
        self.count = 0

    @property
    def id(self) -> str:
        return bytes_to_base64url(self.credential_id)

    def _client_data(self, kind: str, options: dict[str, Any]) -> bytes:
        data = {"type": kind, "challenge": options["challenge"], "origin": self.origin}
        return json.dumps({**data, "crossOrigin": False}).encode()

    def _auth_data(self, flags: int, rest: bytes = b"") -> bytes:
        rp_hash = hashlib.sha256(self.rp_id.encode()).digest()
        return rp_hash + bytes([flags]) + struct.pack(">I", self.count) + rest

    def create(self, options: dict[str, Any]) -> dict[str, Any]:
        """The answer to navigator.credentials.create's options (attestation "none")."""
        numbers = self.key.public_key().public_numbers()
        cose = {
            1: 2,
            3: -7,
            -1: 1,
            -2: numbers.x.to_bytes(32, "big"),
            -3: numbers.y.to_bytes(32, "big"),
        }
        attested = bytes(16) + struct.pack(">H", len(self.credential_id)) + self.credential_id
        auth_data = self._auth_data(UP_UV | ATTESTED, attested + encode_cbor(cose))
        attestation = encode_cbor({"fmt": "none", "attStmt": {}, "authData": auth_data})
        return {
            "id": self.id,
            "rawId": self.id,
            "type": "public-key",
            "clientExtensionResults": {},
            "response": {
                "clientDataJSON": bytes_to_base64url(self._client_data("webauthn.create", options)),
                "attestationObject": bytes_to_base64url(attestation),
                "transports": ["internal"],
            },
        }

    def get(self, options: dict[str, Any]) -> dict[str, Any]:
        """The answer to navigator.credentials.get's options: a signed assertion."""
        allowed = [d["id"] for d in options.get("allowCredentials") or []]
        assert not allowed or self.id in allowed, "the gateway did not ask for this passkey"
        self.count += 1
        client_data = self._client_data("webauthn.get", options)
        auth_data = self._auth_data(UP_UV)
        signed = auth_data + hashlib.sha256(client_data).digest()
        signature = self.key.sign(signed, ec.ECDSA(hashes.SHA256()))
        return {
            "id": self.id,
            "rawId": self.id,
            "type": "public-key",
            "clientExtensionResults": {},
            "response": {
                "clientDataJSON": bytes_to_base64url(client_data),
                "authenticatorData": bytes_to_base64url(auth_data),
                "signature": bytes_to_base64url(signature),
            },
        }


def challenge_of(options: dict[str, Any]) -> bytes:
    return base64url_to_bytes(options["challenge"])
