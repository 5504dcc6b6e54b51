"""Durations as the cards write them: 1800 → "30 min"."""

from typing import Any

from django import template

register = template.Library()


@register.filter
def duration(seconds: Any) -> str:
    if not isinstance(seconds, int) or isinstance(seconds, bool):
        return ""
    if seconds % 3600 == 0:
        return f"{seconds // 3600} h"
    if seconds % 60 == 0:
        return f"{seconds // 60} min"
    return f"{seconds} s"
