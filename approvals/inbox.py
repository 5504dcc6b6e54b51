"""The live inbox: what waits for a decision or a reply, filtered, ordered and counted."""

from collections import Counter
from typing import Any

from django.contrib.auth.decorators import login_required
from django.db.models import F, QuerySet
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import render
from django.views.decorators.http import require_GET

from access.permissions import require
from agents import policy
from agents.cursor import page_cursor
from agents.models import AgentDefinition, StackFrame, Suspension, Thread
from agents.runtime.tools import registry as tool_registry
from approvals.cards import card
from approvals.fragments import group_sizes
from approvals.http import parse_uuid

# The inbox's first page.
INBOX_LIMIT = 100
INBOX_FILTERS = (("agent", "agent_name"), ("tool", "tool_name"), ("kind", "kind"))
# The inbox's orders (static/js/inbox.js places a card that arrives live by the same keys, its
# data-expires and data-created):
# most urgent first, the earliest deadline first (served by suspension_overdue_idx), those
# without a deadline last, then oldest first; or by age alone (suspension_pending_idx).
INBOX_ORDERS = {
    "urgent": (F("expires_at").asc(nulls_last=True), "created_at", "id"),
    "oldest": ("created_at", "id"),
    "newest": ("-created_at", "-id"),
}
INBOX_ORDER_LABELS = {
    "urgent": "Most urgent first",
    "oldest": "Oldest first",
    "newest": "Newest first",
}


def waiting_replies(filters: dict[str, str], thread: Any = None) -> list[dict[str, Any]]:
    """Threads whose agent asked a question and waits for a person's reply, oldest first: the
    inbox lists them next to the approvals (the same set as GET /api/threads?status=waiting_input
    and A2A's input-required tasks that wait for text)."""
    if filters.get("tool") or filters.get("kind") not in (None, "input"):
        return []
    waiting = Thread.objects.filter(status=Thread.Status.WAITING_INPUT)
    if thread is not None:
        waiting = waiting.filter(pk=thread)
    threads = list(waiting.order_by("updated_at")[:INBOX_LIMIT])
    tops: dict[Any, StackFrame] = {}
    frames = StackFrame.objects.filter(
        thread__in=threads, status=StackFrame.Status.ACTIVE, lane__isnull=True
    ).only("thread_id", "depth", "agent_name", "agent_type", "instance")
    for f in frames:
        if f.thread_id not in tops or f.depth > tops[f.thread_id].depth:
            tops[f.thread_id] = f
    found = []
    for t in threads:
        top = tops.get(t.pk)
        agent = top.agent_name if top else ""
        if filters.get("agent") and filters["agent"] != agent:
            continue
        found.append(
            {
                "thread": str(t.pk),
                "agent": agent,
                "frame": top.label if top else "",
                "prompt": t.input_prompt,
                "created_by": t.created_by_name or None,
                "expires_at": t.input_expires_at.isoformat() if t.input_expires_at else None,
            }
        )
    return found


def inbox_order(request: HttpRequest) -> str:
    """The order the reader chose (`?order=`), remembered in their session; urgent by default."""
    chosen = request.GET.get("order")
    if chosen in INBOX_ORDERS:
        if request.session.get("inbox_order") != chosen:
            request.session["inbox_order"] = chosen
        return chosen
    remembered = request.session.get("inbox_order")
    return remembered if remembered in INBOX_ORDERS else "urgent"


# The inbox counts what waits per agent and tool while at most this many wait: counting more
# would read every pending row on each page load, slower than the page it counts for
# (bench/README.md), and a reviewer facing thousands filters rather than counts.
COUNTED_LIMIT = 1000


def pending_counts() -> dict[str, dict[str, int]] | None:
    """How many requests wait, per agent and per tool; None when more than COUNTED_LIMIT do
    (read through suspension_pending_idx, at most COUNTED_LIMIT + 1 rows)."""
    rows = list(
        Suspension.objects.filter(status=Suspension.Status.PENDING, ignored_at__isnull=True)
        .order_by("created_at", "id")
        .values_list("agent_name", "tool_name")[: COUNTED_LIMIT + 1]
    )
    if len(rows) > COUNTED_LIMIT:
        return None
    return {
        "agents": dict(Counter(agent for agent, _ in rows)),
        "tools": dict(Counter(tool for _, tool in rows)),
    }


def pending_rows(request: HttpRequest) -> tuple[QuerySet[Suspension], dict[str, str]]:
    """What waits for a decision under the reader's filters (`?agent=`, `?tool=`, `?kind=`).
    Ignored ones stay pending until their deadline, off the inbox (agents.decisions.ignore)."""
    rows = Suspension.objects.filter(status=Suspension.Status.PENDING, ignored_at__isnull=True)
    filters = {}
    for key, column in INBOX_FILTERS:
        value = request.GET.get(key, "")
        if value:
            rows = rows.filter(**{column: value})
            filters[key] = value
    return rows, filters


def filter_options() -> dict[str, Any]:
    """The agents and tools the filters offer, each with how many of its requests wait (None
    for each while too many wait to count them)."""
    counts = pending_counts()
    known = counts or {"agents": {}, "tools": {}}
    agents = sorted(
        set(AgentDefinition.objects.values_list("name", flat=True)) | known["agents"].keys()
    )
    tools = sorted(set(tool_registry.tools) | known["tools"].keys())
    return {
        "agents": [(a, known["agents"].get(a, 0) if counts else None) for a in agents],
        "tools": [(t, known["tools"].get(t, 0) if counts else None) for t in tools],
    }


@login_required
def inbox(request: HttpRequest) -> HttpResponse:
    require(request, "agents.view_suspension")
    # Read before the state, so the state holds at least what it covers.
    cursor = page_cursor()
    rows, filters = pending_rows(request)
    order = inbox_order(request)
    page = list(rows.order_by(*INBOX_ORDERS[order])[:INBOX_LIMIT])
    count = len(page) if len(page) < INBOX_LIMIT else rows.count()
    replies = waiting_replies(filters)
    viewer = policy.Viewer.of(request.user)
    cards = [card(s, viewer) for s in page]
    sizes = group_sizes({c["group"] for c in cards})
    for c in cards:
        c["group_size"] = sizes.get(c["group"], 0)
    options = filter_options()
    return render(
        request,
        "approvals/inbox.html",
        {
            "cards": cards,
            "replies": replies,
            "can_reply": request.user.has_perm("agents.change_thread"),
            "count": count + len(replies),
            "more": count - len(cards),
            "filters": filters,
            "active_filters": len(filters),
            "order": order,
            "orders": INBOX_ORDER_LABELS,
            "agents": options["agents"],
            "tools": options["tools"],
            "kinds": Suspension.Kind.values,
            "can_decide": request.user.has_perm("agents.decide_suspension"),
            "selectable": True,  # the cards' Select boxes (static/js/select.js)
            "nav": "inbox",
            "live": {
                "cursor": cursor,
                "filters": filters,
                "order": order,
            },
        },
    )


@require_GET
@login_required
def counts_fragment(request: HttpRequest) -> HttpResponse:
    """The inbox's counts under the reader's filters: how many wait (approvals and replies),
    and per agent and tool in the filters' options; the page swaps them in by id."""
    require(request, "agents.view_suspension")
    rows, filters = pending_rows(request)
    options = filter_options()
    context = {
        "count": rows.count() + len(waiting_replies(filters)),
        "filters": filters,
        "agents": options["agents"],
        "tools": options["tools"],
    }
    response = render(request, "approvals/_inbox_counts.html", context)
    response["Cache-Control"] = "no-store"
    return response


@require_GET
@login_required
def reply_fragment(request: HttpRequest, thread_id: str) -> HttpResponse:
    """A thread's "waits for your reply" card as the inbox shows it under the reader's filters;
    empty once it waits no more (answered, timed out, ended) or the filters leave it out."""
    require(request, "agents.view_suspension")
    pk = parse_uuid(thread_id)
    if pk is None:
        raise Http404
    _, filters = pending_rows(request)
    found = waiting_replies(filters, thread=pk)
    if found:
        context = {"r": found[0], "can_reply": request.user.has_perm("agents.change_thread")}
        response = render(request, "approvals/_reply.html", context)
    else:
        response = HttpResponse("")
    response["Cache-Control"] = "no-store"
    return response
