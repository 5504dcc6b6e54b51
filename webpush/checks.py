"""System checks for the Web Push settings."""

from typing import Any

from django.conf import settings
from django.core.checks import Error, register

from webpush import keys


@register()
def check_webpush(app_configs: Any, **kwargs: Any) -> list[Error]:
    errors = []
    subject = settings.WEBPUSH_VAPID_SUBJECT
    if subject and not subject.startswith(("mailto:", "https://")):
        errors.append(
            Error(
                "WEBPUSH_VAPID_SUBJECT must be a mailto: address or an https:// URL (RFC 8292): "
                "the push services' operators reach the sender there.",
                id="webpush.E001",
            )
        )
    if settings.WEBPUSH_VAPID_PRIVATE_KEY:
        try:
            keys.vapid()
        except Exception as e:
            errors.append(Error(str(e), id="webpush.E002"))
    return errors
