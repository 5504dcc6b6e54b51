"""The text limits of the API, for the pages' inputs (the server checks them in approvals.api)."""

from typing import Any

from django.conf import settings
from django.http import HttpRequest

from approvals.templatetags.durations import duration


def limits(request: HttpRequest) -> dict[str, Any]:
    """A context processor: `maxlength` on every box that posts text, so a reviewer learns the
    limit while typing rather than from a refused answer."""
    return {
        "limits": {
            "message": settings.MAX_MESSAGE_CHARS,
            "reason": settings.MAX_REASON_CHARS,
            "extensions": extensions(settings.MAX_EXTENSION_SECONDS),
        }
    }


EXTENSIONS = (300, 900, 1800, 3600, 4 * 3600, 24 * 3600)


def extensions(limit: int) -> list[tuple[int, str]]:
    """The amounts a card offers to extend a deadline by: none over MAX_EXTENSION_SECONDS,
    and that limit itself."""
    offered = [s for s in EXTENSIONS if s < limit] + [limit]
    return [(s, duration(s)) for s in offered]
