"""What a card shows of a call's arguments: a table of fields, and the before/after of an edit.

static/js/cards.js `showFields` and `diffTable` build the same rows for the cards the page makes
from events. Values are text (the template escapes them, invariant 6), and excerpts
(approvals.excerpt): each at most the value limit, a card's fields at most the card limit in all.
"""

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


def _order(schema: dict[str, Any], *values: Any) -> list[str]:
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
        return []  # the empty skeleton static/js/cards.js fills
    edited = (c.get("policy") or {}).get("edited_args")
    args = edited if edited is not None else c.get("input")
    if not isinstance(args, dict):
        return []
    schema = c.get("schema") or {}
    required = set(schema.get("required") or [])
    url = excerpt.suspension_url(c.get("id"))
    budget = excerpt.card_limit()
    rows = []
    for name in _order(schema, args):
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
    for name in _order(c.get("schema") or {}, before, edited):
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
