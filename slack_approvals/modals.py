"""The Reject… modal: the reason asked for, with the tool's preset reasons offered, and read
back from the submission."""

from typing import Any

from agents import presentation
from agents.models import Suspension
from slack_approvals.message import escaped

REJECT = "reject"
PRESET, PRESET_ACTION = "preset", "preset_reason"
REASON, REASON_ACTION = "reason", "reason_text"
MAX_REASON = 2000  # characters Slack lets the text field take, as the modal says


def reject_view(s: Suspension) -> dict[str, Any]:
    """The modal for rejecting `s`; its id travels as the view's private_metadata."""
    summary = presentation.payload(s)["summary"] or s.tool_name
    blocks: list[dict[str, Any]] = [
        {"type": "section", "text": {"type": "mrkdwn", "text": f"Reject *{escaped(summary)}*?"}}
    ]
    presets = presentation.payload(s)["reject_reasons"]
    if presets:
        blocks.append(
            {
                "type": "input",
                "block_id": PRESET,
                "optional": True,
                "label": {"type": "plain_text", "text": "Reason"},
                "element": {
                    "type": "static_select",
                    "action_id": PRESET_ACTION,
                    "options": [
                        {
                            "text": {"type": "plain_text", "text": reason[:75]},
                            "value": str(n),
                        }
                        for n, reason in enumerate(presets[:100])
                    ],
                },
            }
        )
    blocks.append(
        {
            "type": "input",
            "block_id": REASON,
            "optional": bool(presets),
            "label": {"type": "plain_text", "text": "In your words" if presets else "Reason"},
            "element": {
                "type": "plain_text_input",
                "action_id": REASON_ACTION,
                "multiline": True,
                "max_length": MAX_REASON,
            },
        }
    )
    return modal(REJECT, s, "Reject the request", "Reject", blocks)


def modal(
    callback_id: str, s: Suspension, title: str, submit: str, blocks: list[dict[str, Any]]
) -> dict[str, Any]:
    """A modal about request `s`, whose id travels as the view's private_metadata."""
    return {
        "type": "modal",
        "callback_id": callback_id,
        "private_metadata": str(s.pk),
        "title": {"type": "plain_text", "text": title},
        "submit": {"type": "plain_text", "text": submit},
        "close": {"type": "plain_text", "text": "Cancel"},
        "blocks": blocks,
    }


def rejection(view: dict[str, Any], reasons: list[str]) -> dict[str, Any]:
    """The decision a submitted modal makes: a rejection with the preset reason chosen (whole,
    from the request's own `reasons`, by its place in the list) and the words typed, joined."""
    values = (view.get("state") or {}).get("values") or {}
    typed = ((values.get(REASON) or {}).get(REASON_ACTION) or {}).get("value") or ""
    chosen = ((values.get(PRESET) or {}).get(PRESET_ACTION) or {}).get("selected_option") or {}
    place = str(chosen.get("value") or "")
    preset = reasons[int(place)] if place.isdigit() and int(place) < len(reasons) else ""
    reason = " · ".join(part.strip() for part in (preset, typed) if part and part.strip())
    return {"approved": False, "reason": reason}


def errors(refusal: str) -> dict[str, str]:
    """The errors that keep the modal open (Slack's response_action "errors") with the refusal
    under the reason's field."""
    return {REASON: refusal[:2000]}
