"""The Account page's devices (templates/approvals/account.html loads it): the reviewer's
devices with notifications on, and the control that turns them on for this one."""

import hashlib
from typing import Any

from django import template

from webpush import keys

register = template.Library()

SAID = {"on": "Device added.", "removed": "Device removed."}


@register.inclusion_tag("webpush/devices.html", takes_context=True)
def device_notifications(context: Any) -> dict[str, Any]:
    request = context["request"]
    return {
        "devices": [
            # The endpoint is a capability URL: the page gets its digest, enough for
            # static/js/devices.js to find this browser's row.
            {"device": d, "digest": hashlib.sha256(d.endpoint.encode()).hexdigest()}
            for d in request.user.devices.all()
        ],
        "public_key": keys.public_key(),
        "said": SAID.get(request.GET.get("devices", "")),
        "csrf_token": context.get("csrf_token"),
    }
