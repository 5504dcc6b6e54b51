"""Pieces of the reviewer pages, rendered by the templates the pages render them with.

The socket carries events, not HTML; a page that hears of one asks here for the piece the event
concerns (a card, transcript lines, the inbox's counts) and swaps it in, so the server is the
only renderer (issue 26). Each piece is checked as its page is: a login and the page's
permission, and it shows only what the page would show that reader, escaped and bounded by the
same templates and template tags (approvals.excerpt).
"""

from datetime import datetime
from typing import Any

from django.contrib.auth.decorators import login_required
from django.db.models import Count
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import render
from django.utils import timezone
from django.views.decorators.http import require_GET

from access.permissions import require
from agents import policy
from agents.models import Event, Suspension, Thread
from approvals import triage
from approvals.api.payloads import WAITING, thread_instances, thread_usage
from approvals.cards import card
from approvals.http import parse_uuid
from approvals.transcript import (
    FINISHED,
    HIDDEN,
    seconds,
    state_events,
    thread_state,
    transcript_entry,
)

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
    arguments a quorum votes on). `?in=inbox` (and the inbox's filters): as the inbox shows
    it, with how many calls of its group wait and the identical requests its row stands for,
    or, once it is off the inbox, the line that says what happened to it (with `next=1`: the
    card of the next identical request, or nothing)."""
    require(request, "agents.view_suspension")
    pk = parse_uuid(suspension_id)
    s = Suspension.objects.filter(pk=pk).first() if pk else None
    if s is None:
        raise Http404
    inbox = request.GET.get("in") == "inbox"
    if inbox:
        rows, _ = triage.pending_rows(request)
        ordered = rows.order_by(*triage.INBOX_ORDERS[triage.inbox_order(request)])
        together = triage.grouping(request)
        if request.GET.get("next") and (not s.pending or s.ignored_at):
            # `?next=1`: the row left the inbox; the next of the identical requests it stood
            # for takes its place, if one still waits.
            following = triage.next_of(s, ordered) if together else None
            if following is None:
                return _no_store(HttpResponse(""))
            s = following
    c = card(s, policy.Viewer.of(request.user))
    context = {"c": c, "can_decide": request.user.has_perm("agents.decide_suspension")}
    if inbox:
        if not s.pending or s.ignored_at:
            # Off the inbox: the line that says what happened takes the card's place.
            return _no_store(render(request, "approvals/_gone.html", context))
        c["group_size"] = group_sizes({c["group"]}).get(c["group"], 0)
        # Its row under the reader's filters: with the identical requests it stands for.
        triage.mark(c, triage.group_of(s, ordered, together))
        context["selectable"] = True  # its Select box, as the inbox draws it
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


def _number(n: int) -> str:
    return f"{n or 0:,}"


def batch_context(thread: Thread) -> dict[str, Any]:
    """The batch panel's lines (each instance, its state, duration, tokens and tools) and the
    thread's token usage, as the thread page shows them."""
    now = timezone.now()
    instances = []
    for i in thread_instances(thread):
        started = datetime.fromisoformat(i["started_at"])
        ms = i["duration_ms"]
        tokens = (i["input_tokens"] or 0) + (i["output_tokens"] or 0)
        instances.append(
            {
                **i,
                "key": "waiting" if i["status"] == WAITING else i["status"],
                "fallback": f"instance {i['id']}",
                "duration": seconds(ms)
                if ms is not None
                else f"{max(0, int((now - started).total_seconds()))} s",
                "tokens": _number(tokens) if tokens else "",
            }
        )
    u = thread_usage(thread)
    total = (u["input_tokens"] or 0) + (u["output_tokens"] or 0)
    agents = [
        {
            "name": name,
            "input_text": _number(a["input_tokens"]),
            "output_text": _number(a["output_tokens"]),
            "total_text": _number((a["input_tokens"] or 0) + (a["output_tokens"] or 0)),
        }
        for name, a in sorted(u["by_agent"].items())
    ]
    usage = {
        "total": total,
        "total_text": _number(total),
        "input_text": _number(u["input_tokens"]),
        "output_text": _number(u["output_tokens"]),
        "agents": agents,
    }
    return {"instances": instances, "usage": usage}


@require_GET
@login_required
def batch_fragment(request: HttpRequest, thread_id: str) -> HttpResponse:
    """The thread page's batch panel and token usage as they stand."""
    require(request, "agents.view_thread")
    pk = parse_uuid(thread_id)
    thread = Thread.objects.filter(pk=pk).first() if pk else None
    if thread is None:
        raise Http404
    return _no_store(render(request, "approvals/_batch_state.html", batch_context(thread)))


@require_GET
@login_required
def thread_head_fragment(request: HttpRequest, thread_id: str) -> HttpResponse:
    """The thread's status and stack, from its events as the page's head shows them."""
    require(request, "agents.view_thread")
    pk = parse_uuid(thread_id)
    thread = Thread.objects.select_related("agent").filter(pk=pk).first() if pk else None
    if thread is None:
        raise Http404
    status, frames = thread_state(state_events(thread), thread)
    context: dict[str, Any] = {"status": status, "frames": frames, "finished": status in FINISHED}
    return _no_store(render(request, "approvals/_thread_state.html", context))


# What a card's "Recent history" shows of its thread: the conversation, most recent last.
HISTORY_TYPES = (
    Event.Type.THREAD_STARTED,
    Event.Type.USER_MESSAGE,
    Event.Type.AGENT_MESSAGE,
    Event.Type.TOOL_CALLED,
    Event.Type.TOOL_RESULT,
    Event.Type.SUSPENSION_DECIDED,
)
HISTORY_SHOWN = 8


@require_GET
@login_required
def history_fragment(request: HttpRequest, thread_id: str) -> HttpResponse:
    """The last lines of a thread's conversation, for a card's "Recent history"."""
    require(request, "agents.view_thread")
    pk = parse_uuid(thread_id)
    thread = Thread.objects.filter(pk=pk).first() if pk else None
    if thread is None:
        raise Http404
    rows = thread.events.filter(type__in=HISTORY_TYPES).order_by("-id")[:HISTORY_SHOWN]
    context = {"events": [transcript_entry(e) for e in reversed(rows)]}
    return _no_store(render(request, "approvals/_history.html", context))
