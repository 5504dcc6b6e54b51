"""System checks that reject settings which cannot work together."""

from typing import Any

from django.conf import settings
from django.core.checks import Error, register


@register()
def check_setup(app_configs: Any, **kwargs: Any) -> list[Error]:
    errors = []
    engine = settings.DATABASES["default"]["ENGINE"]
    if engine not in (
        "django.db.backends.sqlite3",
        "django.db.backends.postgresql",
        "infra.postgresql",  # the same, with a pool that recovers from a restart at once
    ):
        errors.append(
            Error(
                f"Unsupported database engine {engine}; use SQLite or PostgreSQL.",
                id="gateway.E001",
            )
        )
    if settings.REDIS_URL and not settings.REDIS_URL.startswith(
        ("redis://", "rediss://", "unix://")
    ):
        errors.append(
            Error("REDIS_URL must start with redis://, rediss:// or unix://", id="gateway.E002")
        )
    if settings.SWEEP_INTERVAL_SECONDS <= 0:
        errors.append(Error("SWEEP_INTERVAL_SECONDS must be positive", id="gateway.E003"))
    if not 0 < settings.SWEEP_IDLE_SECONDS < settings.SWEEP_STALE_SECONDS:
        errors.append(
            Error(
                f"SWEEP_IDLE_SECONDS ({settings.SWEEP_IDLE_SECONDS:g}) must be positive and less "
                f"than SWEEP_STALE_SECONDS ({settings.SWEEP_STALE_SECONDS}): an idle clock "
                "sleeps that long between sweeps, and /readyz would call it stale",
                id="gateway.E004",
            )
        )
    return errors
