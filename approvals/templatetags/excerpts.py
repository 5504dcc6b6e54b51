"""Untrusted values on a page as excerpts (approvals.excerpt): the text, then how much was cut
with a link to the whole value.

The text goes through `visible` (escaped, controls marked, invariant 6); the link's address is
one the server made (an API path), never taken from the value.
"""

from typing import Any

from django import template
from django.utils.html import format_html
from django.utils.safestring import SafeString

from approvals import excerpt as excerpts
from approvals.templatetags.visible import visible

register = template.Library()


@register.filter
def excerpt(value: Any, url: str = "") -> SafeString:
    """An Excerpt as it is, or any other value cut at the value limit, whole at `url`."""
    shown = value if isinstance(value, excerpts.Excerpt) else excerpts.cut(value, url=url)
    text = visible(shown.text)
    if not shown.cut:
        return text
    if not shown.url:
        return format_html('{}<span class="cut">{}</span>', text, shown.note)
    return format_html(
        '{}<span class="cut">{} — <a href="{}" target="_blank" rel="noopener">'
        "show the whole value</a></span>",
        text,
        shown.note,
        shown.url,
    )


@register.filter
def thousands(n: Any) -> str:
    """A count as the cut notes write it: 1,048,600."""
    return f"{n:,}" if isinstance(n, int) else ""
