"""Untrusted text shown as it is: invisible and direction-changing characters marked, not applied.

An LLM's text or a tool argument may hold a right-to-left override (U+202E) that makes an
account number read backwards, zero-width characters that hide a difference, or controls a
terminal would act on. Pages show each such character as a visible marker, `[U+202E]`, and
never let the browser apply it. static/js/text.js does the same for what the scripts render.
"""

import re
from typing import Any

from django import template
from django.utils.html import conditional_escape, format_html
from django.utils.safestring import SafeString, mark_safe

register = template.Library()

# C0 controls but \t and \n, DEL and C1; the Arabic letter mark; zero-width space, joiners and
# the LTR/RTL marks; embeddings and overrides; word joiner and invisible operators; isolates
# and the deprecated format characters; the byte-order mark; interlinear annotations; tags.
# static/js/text.js CONTROL is the same class, for the little text the scripts still fill
# themselves: what a model is writing (live text, not yet an event), presence names, and the
# server's own refusals.
CONTROL = re.compile(
    "[\x00-\x08\x0b-\x1f\x7f-\x9f\u061c\u200b-\u200f\u202a-\u202e\u2060-\u2064"
    "\u2066-\u206f\ufeff\ufff9-\ufffb\U000e0000-\U000e007f]"
)


def code_point(char: str) -> str:
    """The marker's text: U+ and at least four hex digits."""
    return f"U+{ord(char):04X}"


@register.filter(needs_autoescape=True)
def visible(value: Any, autoescape: bool = True) -> SafeString:
    """The text, escaped, with each control character replaced by a marked `[U+XXXX]`."""
    if value is None:
        return mark_safe("")
    text = conditional_escape(value) if autoescape else str(value)
    return mark_safe(
        CONTROL.sub(
            lambda m: format_html('<span class="ctl">[{}]</span>', code_point(m.group())), text
        )
    )


@register.filter
def json_escaped_controls(value: Any) -> str:
    """JSON text (an argument editor's content) with each control character written as its
    \\uXXXX escape: the same JSON, visible, and it round-trips unchanged. Control characters
    only appear inside JSON strings, where the escape means the character itself."""
    if value is None:
        return ""
    return CONTROL.sub(lambda m: _json_escape(m.group()), str(value))


def _json_escape(char: str) -> str:
    point = ord(char)
    if point <= 0xFFFF:
        return f"\\u{point:04x}"
    point -= 0x10000  # a surrogate pair, as JSON writes characters beyond the BMP
    return f"\\u{0xD800 + (point >> 10):04x}\\u{0xDC00 + (point & 0x3FF):04x}"
