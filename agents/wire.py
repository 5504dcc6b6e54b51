"""An event's wire form: the socket message every reader of events sends (hub, replay, wake-up).

The encoding is a pure function of the event, so it lives with the events: agents.events
carries it in its wake-ups, and approvals.hub and the sockets' own replays send the same text.
"""

import json
from typing import Any

# One socket message at most, in bytes. daphne refuses frames over 1 MiB and a browser page
# applies every message it gets: a bigger event travels as a summary, whole over REST.
MESSAGE_LIMIT = 16 * 1024
# How a summary shrinks an event's payload, tried in turn until the message fits: the longest
# string kept (characters), the most items of a list or keys of an object, the deepest nesting.
SUMMARY_STEPS = ((2000, 50, 6), (500, 20, 4), (100, 10, 3))


def socket_message(message: dict[str, Any]) -> str:
    """The event as one socket message of at most MESSAGE_LIMIT bytes: whole when it fits,
    else a summary whose payload is cut down, with `"truncated": true` and the `url` of the
    whole event (approvals.api.events). Both the replay and the live batches come from here."""
    text = json.dumps(message)  # ASCII only, so its length is its size in bytes
    if len(text) <= MESSAGE_LIMIT:
        return text
    head = {k: v for k, v in message.items() if k != "payload"}
    head.update(truncated=True, url=f"/api/events/{message['id']}")
    payload = message.get("payload")
    for longest, items, depth in SUMMARY_STEPS:
        text = json.dumps({**head, "payload": shrink(payload, longest, items, depth)})
        if len(text) <= MESSAGE_LIMIT:
            return text
    # Still too big (thousands of keys): keep the payload's short top-level values, which name
    # what the event is about (ids, status, tool), and let the client fetch the rest.
    kept = {
        k: v
        for k, v in (payload.items() if isinstance(payload, dict) else ())
        if len(k) <= 100 and (v is None or isinstance(v, bool | int | float) or _short(v))
    }
    text = json.dumps({**head, "payload": kept})
    if len(text) <= MESSAGE_LIMIT:
        return text
    return json.dumps({**head, "payload": {}})


def _short(value: Any) -> bool:
    return isinstance(value, str) and len(value) <= 100


def shrink(value: Any, longest: int, items: int, depth: int) -> Any:
    """`value` with long strings cut (with a marker saying how much), long lists and objects
    cut to their first `items`, and what is nested deeper than `depth` replaced by a marker."""
    if isinstance(value, str):
        if len(value) <= longest:
            return value
        return f"{value[:longest]}… [{len(value) - longest} more characters]"
    if not isinstance(value, dict | list):
        return value
    if depth <= 0:
        return "… [nested value cut]"
    if isinstance(value, list):
        kept = [shrink(v, longest, items, depth - 1) for v in value[:items]]
        if len(value) > items:
            kept.append(f"… [{len(value) - items} more items]")
        return kept
    cut = dict(list(value.items())[:items])
    shrunk = {
        shrink(k, 100, items, 1): shrink(v, longest, items, depth - 1) for k, v in cut.items()
    }
    if len(value) > items:
        shrunk["…"] = f"{len(value) - items} more keys"
    return shrunk
