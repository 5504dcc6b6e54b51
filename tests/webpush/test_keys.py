"""The VAPID key: made once and kept in the database (sealed), or taken from the settings."""

from typing import Any

import pytest
from cryptography.hazmat.primitives.serialization import Encoding, PublicFormat
from django.core.checks import run_checks
from py_vapid import Vapid

from webpush import keys
from webpush.models import VapidKey


@pytest.mark.django_db
class VapidKeyTestCase:
    def test_a_key_is_made_once_and_kept_sealed(self) -> None:
        first = keys.public_key()
        assert keys.public_key() == first
        [row] = VapidKey.objects.all()
        assert "PRIVATE KEY" not in row.private_sealed  # sealed under SECRET_KEY
        assert len(first) == 87  # 65 bytes, base64url: an uncompressed P-256 point

    def test_the_settings_key_is_used_when_set(self, settings: Any) -> None:
        made = Vapid()
        made.generate_keys()
        settings.WEBPUSH_VAPID_PRIVATE_KEY = made.private_pem().decode()
        raw = made.public_key.public_bytes(Encoding.X962, PublicFormat.UncompressedPoint)
        assert (
            keys.vapid().public_key.public_bytes(Encoding.X962, PublicFormat.UncompressedPoint)
            == raw
        )
        assert not VapidKey.objects.exists()

    def test_the_subject_and_a_bad_key_are_checked(self, settings: Any) -> None:
        settings.WEBPUSH_VAPID_SUBJECT = "ops@example.com"
        settings.WEBPUSH_VAPID_PRIVATE_KEY = "not a key"
        ids = {e.id for e in run_checks()}
        assert {"webpush.E001", "webpush.E002"} <= ids
        settings.WEBPUSH_VAPID_SUBJECT = "mailto:ops@example.com"
        settings.WEBPUSH_VAPID_PRIVATE_KEY = ""
        assert keys.subject() == "mailto:ops@example.com"
        settings.WEBPUSH_VAPID_SUBJECT = ""
        settings.SITE_URL = "https://gateway.example.com/"
        assert keys.subject() == "https://gateway.example.com"
