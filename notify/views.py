"""The email preferences page: a reviewer opts in to email, for every agent or some."""

from django.contrib.auth.decorators import login_required
from django.core.exceptions import PermissionDenied
from django.db import transaction
from django.http import HttpRequest, HttpResponse
from django.shortcuts import redirect, render

from agents.models import AgentDefinition
from notify.models import EmailOptIn


@login_required
def preferences(request: HttpRequest) -> HttpResponse:
    # Only people who may decide get requests by email: the link leads to a decision.
    if not request.user.has_perm("agents.decide_suspension"):
        raise PermissionDenied
    agents = list(AgentDefinition.objects.order_by("name"))
    chosen = EmailOptIn.objects.filter(user=request.user)
    if request.method == "POST":
        every = request.POST.get("every") == "on"
        names = set(request.POST.getlist("agent"))
        picked = [] if every else [a for a in agents if a.name in names]
        with transaction.atomic():
            chosen.delete()
            if every:
                EmailOptIn.objects.create(user=request.user, agent=None)
            EmailOptIn.objects.bulk_create([EmailOptIn(user=request.user, agent=a) for a in picked])
        return redirect(f"{request.path}?saved=1")
    ids = set(chosen.values_list("agent_id", flat=True))
    return render(
        request,
        "notify/preferences.html",
        {
            "every": None in ids,
            "agents": [{"name": a.name, "checked": a.pk in ids} for a in agents],
            "saved": request.GET.get("saved") == "1",
            "nav": "email",
        },
    )
