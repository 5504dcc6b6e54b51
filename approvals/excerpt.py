"""An excerpt: what a page shows of one untrusted value, at most a set number of bytes.

A tool argument, an agent's message or a tool's result may be megabytes (a runaway model, or a
prompt injection that wants reviewers blind); drawn whole, four such requests stopped every
reviewer's browser. So every page, email and status text that shows such a value shows an
excerpt of it: the value cut on a character boundary at DISPLAY_MAX_VALUE_BYTES bytes of UTF-8,
a card's arguments at DISPLAY_MAX_CARD_BYTES in all, saying how many bytes were left out and
where the whole value is (GET /api/suspensions/{id} or GET /api/events/{id}, which a browser
opens as text). The socket's own bound is agents.wire.MESSAGE_LIMIT; static/js/text.js
`excerpt` cuts what the scripts draw by the same rule, with the limits the pages pass it
(approvals.limits).
"""

from dataclasses import dataclass

from django.conf import settings


@dataclass(frozen=True)
class Excerpt:
    """`text`, the part shown; `cut`, how many bytes of the value it leaves out; `url`, the
    whole value's address (shown only when something was cut)."""

    text: str
    cut: int = 0
    url: str = ""

    def __str__(self) -> str:
        return self.text

    @property
    def note(self) -> str:
        """How much is missing, as the pages and emails say it; "" for a whole value."""
        return f"… {self.cut:,} more bytes" if self.cut else ""


def value_limit() -> int:
    """The most bytes of one value a page shows."""
    return settings.DISPLAY_MAX_VALUE_BYTES


def card_limit() -> int:
    """The most bytes of a request's arguments one card shows, all fields together."""
    return settings.DISPLAY_MAX_CARD_BYTES


def size(text: str) -> int:
    """The text's size in bytes of UTF-8 (a lone surrogate counted as the three it encodes to)."""
    return len(text.encode("utf-8", "surrogatepass"))


def cut(text: object, limit: int | None = None, url: str = "") -> Excerpt:
    """At most `limit` bytes of the text (the value limit by default), cut between characters."""
    text = "" if text is None else str(text)
    limit = value_limit() if limit is None else max(limit, 0)
    # A character is at most 4 bytes: text this short fits without being encoded.
    if len(text) * 4 <= limit:
        return Excerpt(text)
    data = text.encode("utf-8", "surrogatepass")
    if len(data) <= limit:
        return Excerpt(text)
    # "ignore" drops the bytes of a character the cut splits.
    kept = data[:limit].decode("utf-8", "ignore")
    return Excerpt(kept, len(data) - size(kept), url)


def suspension_url(suspension_id: object) -> str:
    return f"/api/suspensions/{suspension_id}"


def event_url(event_id: object) -> str:
    return f"/api/events/{event_id}"
