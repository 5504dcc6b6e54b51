"""A suspension's card as the pages draw it (the inbox and thread pages, and the card the pages
ask for again when an event concerns it, approvals.fragments)."""

import json
from typing import Any

from django.conf import settings

from access import passkeys
from agents import grants, policy, receipts, versions
from agents.models import Suspension
from agents.payloads import suspension_payload
from approvals import excerpt
from approvals.templatetags.visible import CONTROL


def pretty(value: Any) -> str:
    """Arguments as a reviewer reads them; the template escapes the text (invariant 6)."""
    return json.dumps(value, indent=2, ensure_ascii=False)


def signed_with(proof: Any) -> str:
    """The words " with the passkey 'Laptop'" when a `step_up` approval or vote carried the proof
    {"credential", "name"} (its event's and its receipt's `passkey`), else "". The name is
    the reviewer's own text: bounded as registering bounds it, escaped and its controls marked
    by the template."""
    name = proof.get("name") if isinstance(proof, dict) else None
    return f" with the passkey '{name[: passkeys.MAX_NAME_CHARS]}'" if isinstance(name, str) else ""


def card(s: Suspension, viewer: policy.Viewer) -> dict[str, Any]:
    """What an inbox card shows: the API's shape, the pretty-printed arguments (while it is
    pending, an edit a quorum votes on) within the display limits (approvals.excerpt), and
    whether the viewer may decide it and if not why (agents.policy)."""
    version = versions.version_payload(s) if s.pending else None
    shown = policy.proposal(s) if s.pending else s.tool_input
    whole = pretty(shown)
    url = excerpt.suspension_url(s.id)
    args = excerpt.cut(whole, excerpt.card_limit(), url)
    return {
        **suspension_payload(s),
        # The arguments whole (the raw JSON view, data-args and the editor) while they fit on a
        # card; bigger ones are shown cut at the value limit, and the card refuses to edit them
        # (data-args-size), since an edit of a cut text would send the cut text.
        "input_pretty": "" if args.cut else whole,
        "args_shown": excerpt.cut(whole, url=url) if args.cut else args,
        "args_size": excerpt.size(whole) if args.cut else 0,
        "prompt_shown": excerpt.cut(s.prompt, url=url),
        "api_url": url,
        "version": version,
        "you": policy.viewer_payload(s, viewer),
        "grant_form": grant_form(s, viewer),
        # " with the passkey '…'" of a step_up approval, as its signed receipt names it.
        "signed_with": signed_with(receipts.decider_of(s.receipt).get("passkey")),
    }


# The lifetimes the card's grant form offers (at most MAX_GRANT_SECONDS).
LIFETIMES = ((900, "15 minutes"), (3600, "1 hour"), (4 * 3600, "4 hours"), (8 * 3600, "8 hours"))


def grant_form(s: Suspension, viewer: policy.Viewer) -> dict[str, Any] | None:
    """What the card's "Approve and grant…" form offers the viewer (agents.grants): the
    conditions on this request's arguments, the lifetimes, the proposal after identical
    approvals; None when they may not grant it (or it is not pending, or not approvable as
    asked)."""
    if not s.pending or not policy.of(s)["allow_accept"] or grants.why_not(s, viewer):
        return None
    longest = settings.MAX_GRANT_SECONDS
    lifetimes = [(n, label) for n, label in LIFETIMES if n <= longest] or [(longest, "")]
    proposed = grants.proposal(s, viewer)
    rows = []
    for cond in grants.offer(s):
        value = cond["value"]
        kind = (
            "boolean"
            if isinstance(value, bool)
            else "string"
            if isinstance(value, str)
            else "number"
        )
        shown = json.dumps(value) if kind == "boolean" else str(value)
        if CONTROL.search(cond["arg"] + shown) or len(cond["arg"]) > 100 or len(shown) > 200:
            # Untrusted text a form field would carry whole, invisible characters and all (the
            # card shows them marked, the editor escaped): no condition offered on it here
            # (the API takes any).
            continue
        ops = ("==", "!=", "<", "<=", ">", ">=") if kind == "number" else ("==", "!=")
        rows.append({"arg": cond["arg"], "value": shown, "type": kind, "ops": ops})
    return {
        "conditions": rows,
        "lifetimes": lifetimes,
        "default_seconds": 3600 if longest >= 3600 else lifetimes[-1][0],
        "max_uses": settings.MAX_GRANT_USES,
        "proposal": proposed,
        "started_by": policy.of(s).get("started_by"),
    }
