"""The live inbox: what waits for a decision or a reply, filtered, ordered and counted."""

from typing import Any

from django.contrib.auth.decorators import login_required
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import render
from django.views.decorators.http import require_GET

from access.permissions import require
from agents import policy
from agents.cursor import page_cursor
from agents.models import StackFrame, Suspension, Thread
from approvals import triage
from approvals.cards import card
from approvals.fragments import group_sizes
from approvals.http import parse_uuid
from approvals.triage import INBOX_ORDER_LABELS, INBOX_ORDERS, inbox_order, pending_rows

# The inbox's first page: this many rows (a row is one request, or a group of identical ones).
INBOX_LIMIT = 100


def waiting_replies(filters: dict[str, str], thread: Any = None) -> list[dict[str, Any]]:
    """Threads whose agent asked a question and waits for a person's reply, oldest first: the
    inbox lists them next to the approvals (the same set as GET /api/threads?status=waiting_input
    and A2A's input-required tasks that wait for text)."""
    # A question has no tool, risk or claim: those filters leave the replies out.
    if any(k in filters for k in ("tool", "risk", "claim")) or filters.get("kind") not in (
        None,
        "input",
    ):
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


@login_required
def inbox(request: HttpRequest) -> HttpResponse:
    require(request, "agents.view_suspension")
    # Read before the state, so the state holds at least what it covers.
    cursor = page_cursor()
    rows, filters = pending_rows(request)
    order = inbox_order(request)
    ordered = rows.order_by(*INBOX_ORDERS[order])
    together = triage.grouping(request)
    found = triage.groups(ordered, INBOX_LIMIT, together)
    page = {str(pk): s for pk, s in Suspension.objects.in_bulk([g.first for g in found]).items()}
    shown = sum(g.size for g in found)
    count = shown if len(found) < INBOX_LIMIT else rows.count()
    replies = waiting_replies(filters)
    viewer = policy.Viewer.of(request.user)
    cards = []
    for g in found:
        c = card(page[g.first], viewer)
        triage.mark(c, g)
        cards.append(c)
    sizes = group_sizes({c["group"] for c in cards})
    for c in cards:
        c["group_size"] = sizes.get(c["group"], 0)
    options = triage.filter_options(request.user.pk)
    return render(
        request,
        "approvals/inbox.html",
        {
            "cards": cards,
            "replies": replies,
            "can_reply": request.user.has_perm("agents.change_thread"),
            "count": count + len(replies),
            "more": count - shown,
            "filters": filters,
            "active_filters": len(filters),
            "order": order,
            "orders": INBOX_ORDER_LABELS,
            "together": together,
            "groupings": triage.GROUPINGS,
            "kinds": Suspension.Kind.values,
            "can_decide": request.user.has_perm("agents.decide_suspension"),
            "selectable": True,  # the cards' Select boxes (static/js/select.js)
            "nav": "inbox",
            "live": {
                "cursor": cursor,
                "filters": filters,
                "order": order,
                "together": together,
            },
            **options,
        },
    )


@require_GET
@login_required
def counts_fragment(request: HttpRequest) -> HttpResponse:
    """The inbox's counts under the reader's filters: how many wait (approvals and replies),
    and per agent and tool in the filters' options; the page swaps them in by id."""
    require(request, "agents.view_suspension")
    rows, filters = pending_rows(request)
    context = {
        "count": rows.count() + len(waiting_replies(filters)),
        "filters": filters,
        **triage.filter_options(request.user.pk),
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
