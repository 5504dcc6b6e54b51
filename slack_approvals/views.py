"""The Slack page (/slack/connect): a reviewer sees their link to Slack, asks for one through
the Connect step (slack_approvals.connect), or removes it; and whether the Email page links
to it."""

from typing import Any

from django.contrib.auth.decorators import login_required
from django.core.exceptions import PermissionDenied
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import redirect, render

from slack_approvals import client, connect, links
from slack_approvals.models import SlackLink

DECIDE = "agents.decide_suspension"


def navigation(request: HttpRequest) -> dict[str, Any]:
    """A context processor: the Email page links to the Slack page only while Slack is on."""
    return {"slack_on": client.enabled()}


@login_required
def connect_page(request: HttpRequest) -> HttpResponse:
    if not client.enabled():
        raise Http404("Slack is not set up on this gateway.")
    # A link lets Slack clicks decide as this user: only people who may decide need one.
    if not request.user.has_perm(DECIDE):
        raise PermissionDenied
    error, status = "", 200
    if request.method == "POST":
        if request.POST.get("action") == "unlink":
            links.unlink(request.user, via="page")
            return redirect(f"{request.path}?unlinked=1")
        try:
            connect.ask(request.user, str(request.POST.get("member_id") or "")[:100])
        except connect.Refused as e:
            error, status = e.detail, e.status
        else:
            return redirect(request.path)
    link = SlackLink.objects.filter(user=request.user).first()
    context = {
        "link": link,
        "waiting": None if link else connect.pending(request.user),
        "minutes": connect.LINK_MINUTES,
        "error": error,
        "member_id": str(request.POST.get("member_id") or "")[:100] if error else "",
        "unlinked": request.GET.get("unlinked") == "1",
        # Reached from the Email page (a phone's top bar has no room for one more item).
        "nav": "email",
    }
    return render(request, "slack_approvals/connect.html", context, status=status)
