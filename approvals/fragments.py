"""Pieces of the reviewer pages, rendered by the templates the pages render them with.

The socket carries events, not HTML; a page that hears of one asks here for the piece the event
concerns (a card, transcript lines, the inbox's counts) and swaps it in, so the server is the
only renderer (issue 26). Each piece is checked as its page is: a login and the page's
permission, and it shows only what the page would show that reader, escaped and bounded by the
same templates and template tags (approvals.excerpt).
"""

from typing import Any

from django.contrib.auth.decorators import login_required
from django.db.models import Count
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import render
from django.views.decorators.http import require_GET

from access.permissions import require
from agents import policy
from agents.models import Event, Suspension, Thread
from approvals.cards import card
from approvals.http import parse_uuid
from approvals.transcript import FINISHED, HIDDEN, thread_state, transcript_entry

# The most transcript lines one answer carries; the page asks again from the last one.
ENTRIES_LIMIT = 200
# The most event ids one request for lines may name (a page coalesces a burst into one).
IDS_LIMIT = 200


def group_sizes(groups: set[str]) -> dict[str, int]:
    """How many calls of each group still wait in the inbox: the agent goes on once all are
    decided (pending, not dismissed; agents.decisions.ignore)."""
    if not groups:
        return {}
    rows = (
        Suspension.objects.filter(
            group__in=groups, status=Suspension.Status.PENDING, ignored_at__isnull=True
        )
        .values("group")
        .annotate(n=Count("id"))
    )
    return {str(r["group"]): r["n"] for r in rows}


def _no_store(response: HttpResponse) -> HttpResponse:
    # A piece is the state of the moment it was asked for: never served again from a cache.
    response["Cache-Control"] = "no-store"
    return response


@require_GET
@login_required
def card_fragment(request: HttpRequest, suspension_id: str) -> HttpResponse:
    """One suspension's card as the reader sees it (who may decide it and why not, the
    arguments a quorum votes on); `?in=inbox` adds how many calls of its group wait, as the
    inbox shows it."""
    require(request, "agents.view_suspension")
    pk = parse_uuid(suspension_id)
    s = Suspension.objects.filter(pk=pk).first() if pk else None
    if s is None:
        raise Http404
    c = card(s, policy.Viewer.of(request.user))
    if request.GET.get("in") == "inbox":
        c["group_size"] = group_sizes({c["group"]}).get(c["group"], 0)
    context = {"c": c, "can_decide": request.user.has_perm("agents.decide_suspension")}
    return _no_store(render(request, "approvals/_card.html", context))


def _event_ids(value: str) -> list[int]:
    ids = []
    for part in value.split(",")[:IDS_LIMIT]:
        if part.strip().isdigit():
            ids.append(int(part))
    return ids


def _after(value: str | None) -> int:
    return int(value) if value and value.isdigit() else 0


@require_GET
@login_required
def entries_fragment(request: HttpRequest, thread_id: str) -> HttpResponse:
    """Lines of a thread's transcript as its page shows them: those of the events named by
    `?ids=` (a burst the socket delivered), or those after `?after=` (at most ENTRIES_LIMIT,
    oldest first). A call waiting for a person is its card, not a line of its own."""
    require(request, "agents.view_thread")
    pk = parse_uuid(thread_id)
    thread = Thread.objects.filter(pk=pk).first() if pk else None
    if thread is None:
        raise Http404
    rows = thread.events.exclude(type__in=HIDDEN).order_by("id")
    if "ids" in request.GET:
        rows = rows.filter(id__in=_event_ids(request.GET["ids"]))
    else:
        rows = rows.filter(id__gt=_after(request.GET.get("after")))[:ENTRIES_LIMIT]
    events = list(rows)
    viewer = policy.Viewer.of(request.user)
    suspensions = {str(s.id): s for s in thread.suspensions.all()}
    on_cards = {s.tool_use_id for s in suspensions.values()}
    entries = []
    for e in events:
        if e.type == Event.Type.TOOL_CALLED and e.payload.get("tool_use_id") in on_cards:
            continue
        entry = transcript_entry(e)
        if entry["type"] == Event.Type.AGENT_SUSPENDED and entry["suspension"] in suspensions:
            entry["card"] = card(suspensions[entry["suspension"]], viewer)
        entries.append(entry)
    context = {
        "events": entries,
        "can_decide": request.user.has_perm("agents.decide_suspension"),
    }
    return _no_store(render(request, "approvals/_entries.html", context))


@require_GET
@login_required
def thread_head_fragment(request: HttpRequest, thread_id: str) -> HttpResponse:
    """The thread's status and stack, from its events as the page's head shows them."""
    require(request, "agents.view_thread")
    pk = parse_uuid(thread_id)
    thread = Thread.objects.select_related("agent").filter(pk=pk).first() if pk else None
    if thread is None:
        raise Http404
    status, frames = thread_state(list(thread.events.order_by("id")), thread)
    context: dict[str, Any] = {"status": status, "frames": frames, "finished": status in FINISHED}
    return _no_store(render(request, "approvals/_thread_state.html", context))
