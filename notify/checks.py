"""System checks for the email settings."""

from typing import Any

from django.conf import settings
from django.core.checks import Error, register


@register()
def check_email(app_configs: Any, **kwargs: Any) -> list[Error]:
    errors = []
    if settings.EMAIL_USE_TLS and settings.EMAIL_USE_SSL:
        errors.append(
            Error(
                "EMAIL_USE_TLS and EMAIL_USE_SSL cannot both be true: STARTTLS on a plain port, "
                "or TLS from the start (port 465), not both.",
                id="notify.E001",
            )
        )
    if settings.NOTIFY_INTERVAL_SECONDS <= 0:
        errors.append(Error("NOTIFY_INTERVAL_SECONDS must be positive", id="notify.E002"))
    return errors
