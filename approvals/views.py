"""Pages for people: a thread, the new-run form, health and error pages."""

from django.contrib.auth.decorators import login_required
from django.http import Http404, HttpRequest, HttpResponse, JsonResponse
from django.shortcuts import redirect, render

from access import admission, ratelimits
from access.permissions import require
from agents import policy, starting
from agents.cursor import page_cursor
from agents.models import Event, Thread
from approvals.cards import card
from approvals.forms import NewRunForm
from approvals.fragments import batch_context
from approvals.http import error, parse_uuid
from approvals.transcript import FINISHED, HIDDEN, thread_state, transcript_entry


def not_found(request: HttpRequest, exception: Exception | None = None) -> HttpResponse:
    if request.path.startswith("/api/"):
        return error(404, "not_found", "No such resource.")
    return render(request, "approvals/not_found.html", status=404)


def health(request: HttpRequest) -> JsonResponse:
    return JsonResponse({"ok": True})


@login_required
def thread_page(request: HttpRequest, thread_id: str) -> HttpResponse:
    require(request, "agents.view_thread")
    pk = parse_uuid(thread_id)
    thread = Thread.objects.select_related("agent").filter(pk=pk).first() if pk else None
    if thread is None:
        raise Http404
    cursor = page_cursor()
    rows = list(thread.events.order_by("id"))
    # Status and stack come from the same events as the transcript, not from the thread's rows
    # read a moment apart: the page asks for lines after the events it shows, so it must show
    # exactly their effect.
    status, frames = thread_state(rows, thread)
    viewer = policy.Viewer.of(request.user)
    suspensions = {str(s.id): card(s, viewer) for s in thread.suspensions.all()}
    # A call that waits for a person is shown by its card: its TOOL_CALLED line would only
    # repeat the arguments.
    on_cards = {c["tool_use_id"] for c in suspensions.values()}
    events = [
        transcript_entry(e)
        for e in rows
        if e.type not in HIDDEN
        and not (e.type == Event.Type.TOOL_CALLED and e.payload.get("tool_use_id") in on_cards)
    ]
    for entry in events:
        if entry["type"] == Event.Type.AGENT_SUSPENDED:
            entry["card"] = suspensions.get(entry["suspension"])
    return render(
        request,
        "approvals/thread.html",
        {
            "thread": thread,
            "events": events,
            "status": status,
            "finished": status in FINISHED,
            "frames": frames,
            "can_decide": request.user.has_perm("agents.decide_suspension"),
            "can_message": request.user.has_perm("agents.add_thread"),
            "can_cancel": request.user.has_perm("agents.change_thread"),
            **batch_context(thread),
            "live": {"cursor": cursor, "thread": str(thread.id)},
        },
    )


@login_required
def new_run(request: HttpRequest) -> HttpResponse:
    require(request, "agents.add_thread")
    form = NewRunForm(request.POST or None, initial={"agent": request.GET.get("agent")})
    if request.method == "POST" and form.is_valid():
        agent = form.cleaned_data["agent"]
        # The limits of POST /api/threads (access.ratelimits, access.admission): the page
        # is one more way to start runs, counted against the same user.
        try:
            ratelimits.hit(ratelimits.RUNS, request.user)
            with admission.admitted(agent):
                thread = starting.start_thread(agent, form.cleaned_data["message"], request.user)
        except ratelimits.Limited as e:
            form.add_error(None, e.detail)
            response = render(
                request, "approvals/new_run.html", {"form": form, "nav": "new_run"}, status=429
            )
            response["Retry-After"] = str(e.retry_after)
            return response
        return redirect("thread", thread_id=thread.id)
    return render(request, "approvals/new_run.html", {"form": form, "nav": "new_run"})
