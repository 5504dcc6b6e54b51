"""What a card shows: a table of its call's arguments, the before/after of an edit, its title
and what happened to it. The server is the cards' only renderer (the pages ask it for a card
again when an event concerns one, approvals.fragments). Values are text (the template escapes
them, invariant 6), and excerpts (approvals.excerpt): each at most the value limit, a card's
fields at most the card limit in all.
"""

import hashlib
import json
from typing import Any

from django import template

from approvals import excerpt

register = template.Library()


def value_text(value: Any) -> str:
    """One argument as the table shows it: text as it is, anything else as JSON."""
    if isinstance(value, str):
        return value
    if isinstance(value, (dict, list)):
        return json.dumps(value, indent=2, ensure_ascii=False)
    return json.dumps(value, ensure_ascii=False)


def field_order(schema: dict[str, Any], *values: Any) -> list[str]:
    """The required fields in the schema's order, then its other fields, then any others the
    values have, each by name. The required list keeps its order in every database; the keys
    of an object do not (PostgreSQL's jsonb sorts them), so the rest are sorted."""
    schema = schema or {}
    names = [n for n in schema.get("required") or [] if isinstance(n, str)]
    names += sorted(k for k in schema.get("properties") or {} if k not in names)
    for value in values:
        if isinstance(value, dict):
            names += sorted(k for k in value if k not in names)
    return names


@register.filter
def field_rows(c: dict[str, Any]) -> list[dict[str, Any]]:
    """The arguments a card shows (while pending, the edit a quorum votes on), one row each."""
    if not c:
        return []  # the skeleton the lazy boxes are copied from
    edited = (c.get("policy") or {}).get("edited_args")
    args = edited if edited is not None else c.get("input")
    if not isinstance(args, dict):
        return []
    schema = c.get("schema") or {}
    required = set(schema.get("required") or [])
    url = excerpt.suspension_url(c.get("id"))
    budget = excerpt.card_limit()
    rows = []
    for name in field_order(schema, args):
        if name not in args:
            continue
        shown = excerpt.cut(value_text(args[name]), min(excerpt.value_limit(), budget), url)
        budget -= excerpt.size(shown.text)
        rows.append(
            {
                "name": name,
                "value": shown,
                "block": isinstance(args[name], (dict, list)),
                "required": name in required,
            }
        )
    return rows


@register.filter
def diff_rows(c: dict[str, Any]) -> list[dict[str, Any]]:
    """The agent's arguments beside a reviewer's edit, for a decided card; [] without one."""
    if not c:
        return []
    decision = c.get("decision") or {}
    edited = decision.get("modifiedArgs")
    before = c.get("input")
    if not isinstance(edited, dict) or not isinstance(before, dict) or edited == before:
        return []
    missing = object()
    url = excerpt.suspension_url(c.get("id"))
    rows = []
    for name in field_order(c.get("schema") or {}, before, edited):
        old, new = before.get(name, missing), edited.get(name, missing)
        if old is missing and new is missing:
            continue
        rows.append(
            {
                "name": name,
                "before": excerpt.cut("" if old is missing else value_text(old), url=url),
                "after": excerpt.cut("" if new is missing else value_text(new), url=url),
                "changed": old != new,
            }
        )
    return rows


@register.filter
def outcome(c: dict[str, Any]) -> str:
    """What happened to a card's request, in a line: "approved by alice (arguments edited)",
    "approved by alice with the passkey 'Laptop'",
    "timed out: rejected automatically at the deadline"; a dismissed one, by whom."""
    if not c:
        return ""
    d = c.get("decision")
    if not d:
        ignored = c.get("ignored")
        if ignored:
            by = ignored.get("by") or "someone"
            return f"dismissed by {by}; still pending until its deadline"
        return ""
    status = str(d.get("status") or "")
    text = "answered instead of deciding" if status == "responded" else status.replace("_", " ")
    if d.get("decided_by"):
        text += f" by {d['decided_by']}{c.get('signed_with') or ''}"
    if d.get("response") not in (None, ""):
        text += f": {d['response']}"
    elif d.get("reason"):
        text += f": {d['reason']}"
    if d.get("modifiedArgs"):
        text += " (arguments edited)"
    return text


@register.filter
def summary(c: dict[str, Any]) -> str:
    """The card's title: what the call does, filled with the arguments that ran (an edit's,
    once decided), else the tool's name."""
    if not c:
        return ""
    shown = c.get("presentation") or {}
    if c.get("status") != "pending" and shown.get("edited_summary"):
        return str(shown["edited_summary"])
    return str(shown.get("summary") or c.get("tool") or "")


@register.filter
def words(status: Any) -> str:
    """A status as a badge says it: "timed_out" → "timed out"."""
    return str(status or "").replace("_", " ")


@register.filter
def fingerprint(c: dict[str, Any]) -> str:
    """A short digest of everything a card shows: the page swaps in a card it asked for again
    only when this differs, so an event replayed after a reconnect moves nothing on screen."""
    if not c:
        return ""
    text = json.dumps(c, sort_keys=True, default=str, ensure_ascii=False)
    return hashlib.sha256(text.encode()).hexdigest()[:16]
