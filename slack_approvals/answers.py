"""Answer…: a question answered from Slack, in a modal. A question in words (an agent's
`ask_user`) gets a text field; one with the form of a schema (an MCP upstream's elicitation,
`presentation.answer == "form"`) gets a field per property, as the card's form draws them
(approvals.edits.kind_of): text, a number, a choice for an enum or a true/false, JSON text for
anything else. The answer is read back into the body the page sends (`{"response": ...}`, a
JSON object for a form), and the server checks it as it checks the page's."""

import json
from typing import Any

from agents import presentation
from agents.models import Suspension
from approvals.edits import kind_of
from approvals.templatetags.cards import field_order
from slack_approvals.message import escaped
from slack_approvals.modals import modal

ANSWER = "answer"
TEXT, TEXT_ACTION = "text", "answer_text"
FIELD_ACTION = "value"
MAX_TEXT = 3000  # characters Slack lets a text field take
MAX_FIELDS = 50  # blocks a modal may hold, with room for the question
NOT_SET = "(not set)"


def _properties(s: Suspension) -> list[tuple[str, dict[str, Any], bool]]:
    """(name, property, required) of the answer's schema, in the card's order."""
    schema = s.tool_schema if isinstance(s.tool_schema, dict) else {}
    props = schema.get("properties") if isinstance(schema.get("properties"), dict) else {}
    required = set(schema.get("required") or [])
    # In the card's order: the required, then the rest by name (PostgreSQL sorts jsonb keys).
    names = [n for n in field_order(schema) if n in props][:MAX_FIELDS]
    return [(n, props[n] if isinstance(props[n], dict) else {}, n in required) for n in names]


def _form(s: Suspension) -> bool:
    return presentation.payload(s)["answer"] == "form"


def _option(value: Any, label: str) -> dict[str, Any]:
    return {
        "text": {"type": "plain_text", "text": label[:75] or " "},
        "value": json.dumps(value)[:150],
    }


def _field(n: int, name: str, p: dict[str, Any], required: bool) -> dict[str, Any]:
    kind = kind_of(p)
    element: dict[str, Any]
    if kind == "enum" or kind == "boolean":
        choices = p["enum"] if kind == "enum" else [True, False]
        options = [_option(c, c if isinstance(c, str) else json.dumps(c)) for c in choices[:100]]
        element = {"type": "static_select", "action_id": FIELD_ACTION, "options": options}
    elif kind in ("integer", "number"):
        element = {
            "type": "number_input",
            "action_id": FIELD_ACTION,
            "is_decimal_allowed": kind == "number",
        }
    else:
        element = {
            "type": "plain_text_input",
            "action_id": FIELD_ACTION,
            "multiline": kind == "json",
            "max_length": min(int(p.get("maxLength") or MAX_TEXT), MAX_TEXT)
            if kind == "string"
            else MAX_TEXT,
        }
    hint = " · ".join(
        h for h in (str(p.get("description") or ""), kind == "json" and "as JSON") if h
    )
    block: dict[str, Any] = {
        "type": "input",
        "block_id": f"field:{n}",
        "optional": not required,
        "label": {"type": "plain_text", "text": str(p.get("title") or name)[:2000]},
        "element": element,
    }
    if hint:
        block["hint"] = {"type": "plain_text", "text": hint[:2000]}
    return block


def answer_view(s: Suspension) -> dict[str, Any]:
    """The modal answering `s`; its id travels as the view's private_metadata."""
    question = presentation.payload(s)["summary"] or s.tool_name
    blocks: list[dict[str, Any]] = [
        {"type": "section", "text": {"type": "mrkdwn", "text": f"*{escaped(question)}*"}}
    ]
    if _form(s):
        blocks += [_field(n, *prop) for n, prop in enumerate(_properties(s))]
    else:
        blocks.append(
            {
                "type": "input",
                "block_id": TEXT,
                "label": {"type": "plain_text", "text": "Your answer"},
                "element": {
                    "type": "plain_text_input",
                    "action_id": TEXT_ACTION,
                    "multiline": True,
                    "max_length": MAX_TEXT,
                },
            }
        )
    return modal(ANSWER, s, "Answer the question", "Send", blocks)


def _read(p: dict[str, Any], state: dict[str, Any]) -> tuple[Any, str]:
    """(value, "") or (None, what is wrong) for one field's state; (None, "") when empty."""
    if "selected_option" in state:
        chosen = state.get("selected_option") or {}
        return (json.loads(chosen["value"]), "") if chosen.get("value") else (None, "")
    raw = str(state.get("value") or "").strip()
    if not raw:
        return None, ""
    kind = kind_of(p)
    try:
        if kind == "integer":
            return int(raw), ""
        if kind == "number":
            return float(raw), ""
        if kind == "json":
            return json.loads(raw), ""
    except ValueError:
        return None, "Not " + ("JSON" if kind == "json" else f"a valid {kind}") + "."
    return raw, ""


def response(view: dict[str, Any], s: Suspension) -> tuple[dict[str, Any], dict[str, str]]:
    """The decision a submitted modal makes, and the errors per block (none: {})."""
    values = (view.get("state") or {}).get("values") or {}
    if not _form(s):
        typed = ((values.get(TEXT) or {}).get(TEXT_ACTION) or {}).get("value") or ""
        return {"response": typed}, {}
    answer: dict[str, Any] = {}
    errors: dict[str, str] = {}
    for n, (name, p, _) in enumerate(_properties(s)):
        block = f"field:{n}"
        value, wrong = _read(p, (values.get(block) or {}).get(FIELD_ACTION) or {})
        if wrong:
            errors[block] = wrong
        elif value is not None:
            answer[name] = value
    return {"response": json.dumps(answer)}, errors


def first_block(s: Suspension) -> str:
    """Where a refusal of the whole answer is shown in the modal."""
    return "field:0" if _form(s) and _properties(s) else TEXT
