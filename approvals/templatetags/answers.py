"""The answer form of a question asked with a schema (an MCP upstream's elicitation:
mcp_gateway.elicitation): a field per property, drawn as a card's edit form is
(approvals.edits.form_fields and its template), empty for the reviewer to fill in."""

from typing import Any

from django import template
from django.template.loader import render_to_string
from django.utils.safestring import SafeString, mark_safe

from approvals.edits import form_fields

register = template.Library()


@register.simple_tag
def answer_form(c: dict[str, Any]) -> SafeString:
    fields = form_fields(c.get("schema") or {"type": "object"}, {}, f"answer-{c['id']}")
    # The template escapes every name, hint and value it draws from the schema.
    return mark_safe(
        render_to_string("approvals/_edit_form.html", {"fields": fields, "prefer": "form"})
    )
