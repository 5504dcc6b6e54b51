"""A reviewer's edit of a pending call, with the server as its only checker and renderer: the
edit form generated from the tool's input schema, and the review of an edit (its field errors
in a reviewer's words, or what it changes). Nothing here decides or records anything."""

import json
import re
from typing import Any

from django.contrib.auth.decorators import login_required
from django.http import Http404, HttpRequest, HttpResponse, JsonResponse
from django.shortcuts import render
from django.template.loader import render_to_string
from django.views.decorators.http import require_http_methods, require_POST

from access.permissions import require
from agents import policy, presentation
from agents.models import Suspension
from approvals.api.decisions import parse_decision
from approvals.cards import card, grant_form
from approvals.http import BadRequest, bad_request, json_body, parse_uuid
from approvals.templatetags.cards import diff_rows, field_order
from approvals.templatetags.visible import CONTROL


def _pending(request: HttpRequest, suspension_id: str) -> Suspension:
    """The suspension a reviewer edits: who may look at it and decide (the server checks the
    decision itself again when it comes)."""
    require(request, "agents.view_suspension")
    require(request, "agents.decide_suspension")
    pk = parse_uuid(suspension_id)
    s = Suspension.objects.filter(pk=pk).first() if pk else None
    if s is None:
        raise Http404
    return s


def kind_of(p: dict[str, Any]) -> str:
    """How a property is edited: enum, string, integer, number, boolean, or json."""
    if isinstance(p.get("enum"), list):
        return "enum"
    t = p.get("type")
    kinds = [k for k in t if k != "null"] if isinstance(t, list) else [t]
    if len(kinds) != 1:
        return "json"
    return kinds[0] if kinds[0] in ("string", "integer", "number", "boolean") else "json"


def complex_schema(schema: dict[str, Any]) -> bool:
    """A schema a form cannot show well (alternatives, nested objects): edited as JSON."""
    if any(k in schema for k in ("oneOf", "anyOf", "allOf")):
        return True
    for p in (schema.get("properties") or {}).values():
        p = p if isinstance(p, dict) else {}
        if any(k in p for k in ("oneOf", "anyOf", "allOf")):
            return True
        if kind_of(p) == "json" and p.get("type") == "object" and p.get("properties"):
            return True
    return False


def _compact(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"))


def form_fields(schema: dict[str, Any], value: dict[str, Any], prefix: str) -> list[dict[str, Any]]:
    """A typed field per property (text, number, a select for an enum or an optional
    true/false, a checkbox for a required one, JSON text for anything else), in the card's
    field order, each with its current value."""
    props = schema.get("properties") or {}
    required = [n for n in schema.get("required") or [] if isinstance(n, str)]
    fields = []
    for name in field_order(schema, value):
        p = props.get(name) if isinstance(props.get(name), dict) else {}
        kind = kind_of(p)
        has = name in value
        current = value.get(name)
        field: dict[str, Any] = {
            "name": name,
            "kind": kind,
            "id": f"{prefix}-{re.sub(r'[^A-Za-z0-9_-]', '_', name)}",
            "required": name in required,
            "hint": " · ".join(
                h
                for h in (str(p.get("description") or ""), "as JSON" if kind == "json" else "")
                if h
            ),
            "maxlength": p.get("maxLength") if kind == "string" else None,
        }
        if kind == "enum":
            chosen = _compact(current) if has else ""
            choices = [] if field["required"] else [("", "(not set)")]
            choices += [(_compact(x), x if isinstance(x, str) else _compact(x)) for x in p["enum"]]
            field.update(widget="select", choices=[(v, t, v == chosen) for v, t in choices])
        elif kind == "boolean" and field["required"]:
            field.update(widget="checkbox", checked=current is True)
        elif kind == "boolean":
            chosen = _compact(current) if has else ""
            choices = [("", "(not set)"), ("true", "yes"), ("false", "no")]
            field.update(widget="select", choices=[(v, t, v == chosen) for v, t in choices])
        elif kind in ("integer", "number"):
            field.update(
                widget="number",
                step="1" if kind == "integer" else "any",
                min=p.get("minimum") if isinstance(p.get("minimum"), int | float) else None,
                max=p.get("maximum") if isinstance(p.get("maximum"), int | float) else None,
                text=_compact(current) if has and current is not None else "",
            )
        elif kind == "string" and not (
            isinstance(current, str) and (len(current) > 60 or "\n" in current)
        ):
            field.update(widget="text", text=str(current) if has else "")
        else:
            text = json.dumps(current, indent=2, ensure_ascii=False)
            text = "" if not has else str(current) if kind == "string" else text
            field.update(widget="textarea", rows=3 if kind == "string" else 4, text=text)
        fields.append(field)
    return fields


@require_http_methods(["GET", "POST"])
@login_required
def form_fragment(request: HttpRequest, suspension_id: str) -> HttpResponse:
    """The edit form of a card: for the arguments it shows (GET), or for an edit carried over
    from the JSON editor (POST {modifiedArgs}, answered {html}). `data-prefer="json"` when the
    form cannot show them well: a complex schema, or invisible or direction-changing
    characters that a form field would apply rather than show."""
    s = _pending(request, suspension_id)
    value: Any = policy.proposal(s)
    if request.method == "POST":
        try:
            value = json_body(request).get("modifiedArgs")
        except BadRequest as e:
            return bad_request(e)
        if not isinstance(value, dict):
            return bad_request(
                BadRequest(
                    "The arguments must be a JSON object.",
                    {"modifiedArgs": "must be a JSON object"},
                )
            )
    schema = s.tool_schema or {}
    prefer = complex_schema(schema) or bool(CONTROL.search(json.dumps(value, ensure_ascii=False)))
    context = {
        "fields": form_fields(schema, value if isinstance(value, dict) else {}, f"f-{s.id}"),
        "prefer": "json" if prefer else "form",
    }
    if request.method == "POST":
        html = render_to_string("approvals/_edit_form.html", context, request=request)
        return JsonResponse({"html": html}, headers={"Cache-Control": "no-store"})
    response = render(request, "approvals/_edit_form.html", context)
    response["Cache-Control"] = "no-store"
    return response


@require_POST
@login_required
def review_fragment(request: HttpRequest, suspension_id: str) -> HttpResponse:
    """A reviewer's edit of a pending call, checked as resumeExecution checks it (the tool's
    schema as it was when the call was made; 400 with `fields` in the API's words) and, when it
    fits, what it changes: {changed, html} with the before/after the card shows. Nothing is
    decided or recorded."""
    require(request, "agents.view_suspension")
    require(request, "agents.decide_suspension")
    pk = parse_uuid(suspension_id)
    s = Suspension.objects.filter(pk=pk).first() if pk else None
    if s is None:
        raise Http404
    try:
        body = json_body(request)
        edited = parse_decision(s, {"approved": True, "modifiedArgs": body.get("modifiedArgs")})
    except BadRequest as e:
        return bad_request(e)
    after = edited.arguments
    before = policy.proposal(s)
    c = {**card(s, policy.Viewer.of(request.user)), "input": before}
    c["decision"] = {"modifiedArgs": after}
    rows = diff_rows(c)
    changed = sum(1 for row in rows if row["changed"])
    template = (c.get("presentation") or {}).get("summary_template") or ""
    if not changed:
        said = "Nothing changed: use Approve, or edit a field."
    elif template:
        said = f"{presentation.fill(template, before)}  →  {presentation.fill(template, after)}"
    else:
        said = f"{changed} field{'' if changed == 1 else 's'} change{'s' if changed == 1 else ''}."
    html = render_to_string(
        "approvals/_edit_review.html", {"rows": rows, "said": said}, request=request
    )
    return JsonResponse({"changed": changed, "html": html}, headers={"Cache-Control": "no-store"})


@require_http_methods(["GET"])
@login_required
def grant_fragment(request: HttpRequest, suspension_id: str) -> HttpResponse:
    """A card's "Approve and grant…" form (approvals.cards.grant_form), fetched when the
    reviewer opens it: drawn on every card, a thousand of them would outweigh the inbox
    (tests/approvals/test_display_limits.py). 404 when this reviewer may not grant it."""
    s = _pending(request, suspension_id)
    form = grant_form(s, policy.Viewer.of(request.user))
    if form is None:
        raise Http404
    c = {"agent": s.agent_name, "tool": s.tool_name, "grant_form": form}
    response = render(request, "approvals/_grant_box.html", {"c": c})
    response["Cache-Control"] = "no-store"
    return response
