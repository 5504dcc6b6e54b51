"""Pages for people: the live inbox, a thread, the new-run form, health and error pages."""

import json
from collections import Counter
from typing import Any

from django.contrib.auth.decorators import login_required
from django.core.exceptions import PermissionDenied
from django.db.models import F, Max
from django.http import Http404, HttpRequest, HttpResponse, JsonResponse
from django.shortcuts import redirect, render

from agents import actions, policy, versions
from agents.actions import suspension_payload
from agents.models import AgentDefinition, Event, StackFrame, Suspension, Thread
from agents.runtime.tools import registry as tool_registry
from approvals import admission, excerpt, ratelimits
from approvals.api.payloads import thread_instances, thread_usage
from approvals.cursor import page_cursor
from approvals.forms import NewRunForm
from approvals.http import error, parse_uuid

# The inbox's first page.
INBOX_LIMIT = 100
INBOX_FILTERS = (("agent", "agent_name"), ("tool", "tool_name"), ("kind", "kind"))
# The inbox's orders (static/js/inbox.js places a card that arrives live by the same keys):
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


def not_found(request: HttpRequest, exception: Exception | None = None) -> HttpResponse:
    if request.path.startswith("/api/"):
        return error(404, "not_found", "No such resource.")
    return render(request, "approvals/not_found.html", status=404)


def health(request: HttpRequest) -> JsonResponse:
    return JsonResponse({"ok": True})


def _require(request: HttpRequest, perm: str) -> None:
    if not request.user.has_perm(perm):
        raise PermissionDenied


def pretty(value: Any) -> str:
    """Arguments as a reviewer reads them; the template escapes the text (invariant 6)."""
    return json.dumps(value, indent=2, ensure_ascii=False)


def waiting_replies(filters: dict[str, str]) -> list[dict[str, Any]]:
    """Threads whose agent asked a question and waits for a person's reply, oldest first: the
    inbox lists them next to the approvals (the same set as GET /api/threads?status=waiting_input
    and A2A's input-required tasks that wait for text)."""
    if filters.get("tool") or filters.get("kind") not in (None, "input"):
        return []
    threads = list(
        Thread.objects.filter(status=Thread.Status.WAITING_INPUT).order_by("updated_at")[
            :INBOX_LIMIT
        ]
    )
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
        # (static/js/cards.js), since an edit of a cut text would send the cut text.
        "input_pretty": "" if args.cut else whole,
        "args_shown": excerpt.cut(whole, url=url) if args.cut else args,
        "args_size": excerpt.size(whole) if args.cut else 0,
        "prompt_shown": excerpt.cut(s.prompt, url=url),
        "api_url": url,
        "version": version,
        "you": policy.viewer_payload(s, viewer),
    }


def me(viewer: policy.Viewer) -> dict[str, Any]:
    """Who is looking, for the cards the page builds from events (static/js/cards.js works
    out from it whether they may decide, as agents.policy.why_not does)."""
    return {
        "username": viewer.username,
        "groups": sorted(viewer.groups),
        "may_decide": viewer.may_decide,
    }


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
# would read every pending row on each page load (about 150 ms for 100,000 on PostgreSQL,
# against the first page's 50 ms), and a reviewer facing thousands filters rather than counts.
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


@login_required
def inbox(request: HttpRequest) -> HttpResponse:
    _require(request, "agents.view_suspension")
    # Both are read before the state, so the state holds at least what they cover.
    cursor = page_cursor()
    rendered = Event.objects.aggregate(newest=Max("id"))["newest"] or 0
    # Ignored ones stay pending until their deadline, off the inbox (agents.actions.ignore).
    rows = Suspension.objects.filter(status=Suspension.Status.PENDING, ignored_at__isnull=True)
    filters = {}
    for key, column in INBOX_FILTERS:
        value = request.GET.get(key, "")
        if value:
            rows = rows.filter(**{column: value})
            filters[key] = value
    order = inbox_order(request)
    page = list(rows.order_by(*INBOX_ORDERS[order])[:INBOX_LIMIT])
    count = len(page) if len(page) < INBOX_LIMIT else rows.count()
    replies = waiting_replies(filters)
    viewer = policy.Viewer.of(request.user)
    cards = [card(s, viewer) for s in page]
    sizes = Counter(c["group"] for c in cards)
    for c in cards:
        c["group_size"] = sizes[c["group"]]
    counts = pending_counts()
    known = counts or {"agents": {}, "tools": {}}
    agents = sorted(
        set(AgentDefinition.objects.values_list("name", flat=True)) | known["agents"].keys()
    )
    tools = sorted(set(tool_registry.tools) | known["tools"].keys())
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
            "agents": [(a, known["agents"].get(a, 0) if counts else None) for a in agents],
            "tools": [(t, known["tools"].get(t, 0) if counts else None) for t in tools],
            "kinds": Suspension.Kind.values,
            "can_decide": request.user.has_perm("agents.decide_suspension"),
            "nav": "inbox",
            "live": {
                "cursor": cursor,
                "rendered": rendered,
                "filters": filters,
                "order": order,
                "counts": counts,
                # The sort keys of the cards drawn (static/js/inbox.js places live ones by them).
                "created": {c["id"]: c["created_at"] for c in cards},
                "schemas": {c["id"]: c["schema"] for c in cards},
                "me": me(viewer),
            },
        },
    )


def describe(type: str, payload: dict[str, Any], actor: str | None) -> dict[str, str]:
    """Who said what, for one transcript line; static/js/thread.js `describe` mirrors this."""
    p = payload
    if type in (Event.Type.THREAD_STARTED, Event.Type.USER_MESSAGE):
        return {
            "tone": "user",
            "who": actor or "user",
            "text": p.get("message") or p.get("text", ""),
        }
    if type == Event.Type.AGENT_MESSAGE:
        return {"tone": "agent", "who": p.get("frame", ""), "text": p.get("text", "")}
    if type == Event.Type.THREAD_WAITING:
        # Its text was shown already by the AGENT_MESSAGE of the same answer.
        return {"tone": "system", "who": p.get("frame", ""), "text": "waits for your reply"}
    if type == Event.Type.THREAD_SUSPENDED:
        return {
            "tone": "system",
            "who": "thread",
            "text": "every agent instance waits for a person",
        }
    if type == Event.Type.THREAD_RESUMED:
        return {"tone": "system", "who": "thread", "text": "an agent instance works again"}
    if type == Event.Type.TOOL_CALLED:
        return {
            "tone": "tool",
            "who": p.get("frame", ""),
            "text": f"calls {p.get('tool', '')}",
            "pre": pretty(p.get("input")),
        }
    if type == Event.Type.TOOL_RESULT:
        failed = p.get("is_error")
        return {
            "tone": "error" if failed else "result",
            "who": p.get("tool", ""),
            "text": "error" if failed else "result",
            "pre": str(p.get("content", "")),
        }
    if type == Event.Type.AGENT_SUSPENDED:
        kind = "an answer" if p.get("kind") == "input" else "a decision"
        return {
            "tone": "decision",
            "who": (p.get("presentation") or {}).get("asker") or p.get("agent", ""),
            "text": f"waits for {kind}",
        }
    if type == Event.Type.SUSPENSION_IGNORED:
        return {
            "tone": "system",
            "who": actor or p.get("by") or "",
            "text": f"dismissed {p.get('tool', '')} from the inbox; its deadline still applies",
        }
    if type == Event.Type.SUSPENSION_DECIDED:
        if p.get("status") == "responded":
            text = f"answered instead of deciding {p.get('tool', '')}: {p.get('response', '')}"
        elif p.get("response") is not None:
            text = f"answered: {p['response']}"
        else:
            text = f"{p.get('status', '')} {p.get('tool', '')}"
            if p.get("reason"):
                text += f": {p['reason']}"
        edited = p.get("modifiedArgs")
        return {
            "tone": "decision",
            # A rule of the policy decides with no person as actor (agents.policy).
            "who": actor or p.get("decided_by") or "",
            "text": text,
            "pre": pretty(edited) if edited is not None else "",
        }
    if type == Event.Type.SUSPENSION_TIMEOUT:
        verdict = "approved" if p.get("approved") else "rejected"
        return {
            "tone": "decision",
            "who": "deadline",
            "text": f"{p.get('tool', '')} {verdict} automatically",
        }
    if type == Event.Type.SUSPENSION_CANCELLED:
        return {"tone": "decision", "who": actor or "", "text": f"{p.get('tool', '')} cancelled"}
    if type == Event.Type.AGENT_RESUMED:
        return {
            "tone": "system",
            "who": p.get("frame", ""),
            "text": f"resumed after {p.get('tool', '')}",
        }
    if type == Event.Type.FRAME_PUSHED:
        return {"tone": "system", "who": "stack", "text": f"{p.get('frame', '')} started"}
    if type == Event.Type.FRAME_POPPED:
        return {
            "tone": "system",
            "who": "stack",
            "text": f"{p.get('frame', '')} returned to {p.get('to', '')}",
            "pre": str(p.get("result") or ""),
        }
    if type == Event.Type.THREAD_COMPLETED:
        return {
            "tone": "end",
            "who": "thread",
            "text": "completed",
            "pre": str(p.get("result") or ""),
        }
    if type == Event.Type.THREAD_FAILED:
        return {
            "tone": "error",
            "who": "thread",
            "text": "failed",
            "pre": str(p.get("error") or ""),
        }
    if type == Event.Type.THREAD_CANCELLED:
        return {"tone": "end", "who": actor or "thread", "text": "cancelled the run"}
    if type == Event.Type.INSTANCE_STARTED:
        return {
            "tone": "system",
            "who": p.get("parent_frame", ""),
            "text": f"started {p.get('instance', '')}",
        }
    if type == Event.Type.INSTANCE_FINISHED:
        status = p.get("status", "")
        return {
            "tone": "result" if status == "done" and not p.get("is_error") else "error",
            "who": p.get("instance", ""),
            "text": f"{status} in {seconds(p.get('duration_ms'))}",
            "pre": str(p.get("result") or ""),
        }
    if type == Event.Type.INPUT_TIMEOUT:
        told = p.get("on_timeout") == "continue"
        return {
            "tone": "system",
            "who": p.get("frame") or "thread",
            "text": "no reply in time: the agent was told"
            if told
            else "no reply in time: the run is cancelled",
        }
    if type == Event.Type.SUSPENSION_REMINDER:
        return {
            "tone": "system",
            "who": p.get("agent", ""),
            "text": f"reminder: {p.get('tool', '')}",
        }
    if type == Event.Type.SUSPENSION_ESCALATED:
        return {
            "tone": "system",
            "who": p.get("agent", ""),
            "text": f"escalated {p.get('tool', '')} to {p.get('escalate_to', '')}",
        }
    if type == Event.Type.SUSPENSION_VOTED:
        return {
            "tone": "decision",
            "who": actor or p.get("by") or "",
            "text": f"approved {p.get('tool', '')} ({p.get('approvals')} of {p.get('required')} "
            "approvals)",
            "pre": pretty(p["edited_args"]) if p.get("edited_args") is not None else "",
        }
    if type == Event.Type.SUSPENSION_EXTENDED:
        return {
            "tone": "system",
            "who": actor or p.get("by") or "",
            "text": f"extended the deadline of {p.get('tool', '')}",
            "pre": str(p.get("reason") or ""),
        }
    return {"tone": "system", "who": "", "text": type}


# Said already by the line of another event (THREAD_WAITING, USER_MESSAGE): not shown again
# (static/js/thread.js HIDDEN mirrors this).
HIDDEN = {Event.Type.INPUT_REQUIRED, Event.Type.INPUT_PROVIDED}


def seconds(ms: Any) -> str:
    """A duration in milliseconds as the pages write it; static/js/thread.js mirrors this."""
    if not isinstance(ms, int | float):
        return "?"
    return f"{ms / 1000:.1f} s"


# An instance's own chat: shown folded under its INSTANCE_STARTED line (static/js/thread.js
# FOLDED mirrors this); its suspensions and their decisions stay in the transcript, where a
# reviewer answers them.
FOLDED = {
    Event.Type.AGENT_MESSAGE,
    Event.Type.TOOL_CALLED,
    Event.Type.TOOL_RESULT,
    Event.Type.AGENT_RESUMED,
    Event.Type.FRAME_PUSHED,
    Event.Type.FRAME_POPPED,
}


def transcript_entry(e: Event) -> dict[str, Any]:
    """One event as the thread page shows it: `lane`, the instance whose chat folds it away;
    `instance`, the instance an INSTANCE_STARTED line holds the chat of."""
    lane = e.payload.get("lane") if e.type in FOLDED else None
    instance = e.payload.get("frame_id") if e.type == Event.Type.INSTANCE_STARTED else None
    return {
        "id": e.id,
        "type": e.type,
        "created_at": e.created_at,
        # Its text and block are shown cut at the value limit; the whole event is here.
        "url": excerpt.event_url(e.id),
        "suspension": str(e.suspension_id) if e.suspension_id else None,
        "lane": lane if isinstance(lane, int) else None,
        "instance": instance if isinstance(instance, int) else None,
        # A card in the main transcript comes right after the agent's message that its prompt
        # repeats (a card of an instance does not: that message is folded in the instance's
        # chat); static/js/thread.js marks live cards the same way.
        "said_above": e.type == Event.Type.AGENT_SUSPENDED
        and not isinstance(e.payload.get("lane"), int),
        **describe(e.type, e.payload, e.actor_name or None),
    }


# Status after an event; static/js/thread.js STATUS_AFTER mirrors this.
STATUS_AFTER = {
    Event.Type.THREAD_STARTED: Thread.Status.RUNNING,
    Event.Type.USER_MESSAGE: Thread.Status.RUNNING,
    Event.Type.AGENT_RESUMED: Thread.Status.RUNNING,
    Event.Type.AGENT_SUSPENDED: Thread.Status.SUSPENDED,
    Event.Type.THREAD_WAITING: Thread.Status.WAITING_INPUT,
    Event.Type.THREAD_SUSPENDED: Thread.Status.SUSPENDED,
    Event.Type.THREAD_RESUMED: Thread.Status.RUNNING,
    Event.Type.THREAD_COMPLETED: Thread.Status.COMPLETED,
    Event.Type.THREAD_FAILED: Thread.Status.FAILED,
    Event.Type.THREAD_CANCELLED: Thread.Status.CANCELLED,
}
FINISHED = (Thread.Status.COMPLETED, Thread.Status.FAILED, Thread.Status.CANCELLED)


def thread_state(rows: list[Event], thread: Thread) -> tuple[str, list[str]]:
    """The thread's status and stack (frame labels, bottom first) after these events."""
    if not rows:
        frames = thread.frames.filter(status=StackFrame.Status.ACTIVE).order_by("depth")
        return thread.status, [f.label for f in frames]
    status, stack = thread.status, []
    for e in rows:
        if e.payload.get("lane") is not None:
            # An instance's frames are not the main stack, and its suspension does not stop
            # the thread: its siblings and the caller's batch go on (the API says "running").
            continue
        status = STATUS_AFTER.get(e.type, status)
        if e.type == Event.Type.THREAD_STARTED:
            stack = [e.payload.get("agent", thread.agent.name)]
        elif e.type == Event.Type.FRAME_PUSHED:
            stack.append(e.payload.get("frame", ""))
        elif e.type == Event.Type.FRAME_POPPED and stack and stack[-1] == e.payload.get("frame"):
            stack.pop()
        if status in FINISHED:
            stack = []
    return status, stack


@login_required
def thread_page(request: HttpRequest, thread_id: str) -> HttpResponse:
    _require(request, "agents.view_thread")
    pk = parse_uuid(thread_id)
    thread = Thread.objects.select_related("agent").filter(pk=pk).first() if pk else None
    if thread is None:
        raise Http404
    cursor = page_cursor()
    rows = list(thread.events.order_by("id"))
    # Status and stack come from the same events as the transcript, not from the thread's rows
    # read a moment apart: the client skips events the page already shows, so the page must
    # show exactly their effect (static/js/thread.js applies the later ones the same way).
    status, frames = thread_state(rows, thread)
    viewer = policy.Viewer.of(request.user)
    suspensions = {str(s.id): card(s, viewer) for s in thread.suspensions.all()}
    # A call that waits for a person is shown by its card: its TOOL_CALLED line would only
    # repeat the arguments (static/js/thread.js drops it live when the card comes).
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
            "live": {
                "cursor": cursor,
                "thread": str(thread.id),
                "on_cards": sorted(on_cards),
                "schemas": {k: v["schema"] for k, v in suspensions.items()},
                "instances": thread_instances(thread),
                "usage": thread_usage(thread),
                "me": me(viewer),
            },
        },
    )


@login_required
def new_run(request: HttpRequest) -> HttpResponse:
    _require(request, "agents.add_thread")
    form = NewRunForm(request.POST or None, initial={"agent": request.GET.get("agent")})
    if request.method == "POST" and form.is_valid():
        agent = form.cleaned_data["agent"]
        # The limits of POST /api/threads (approvals.ratelimits, approvals.admission): the page
        # is one more way to start runs, counted against the same user.
        try:
            ratelimits.hit(ratelimits.RUNS, request.user)
            with admission.admitted(agent):
                thread = actions.start_thread(agent, form.cleaned_data["message"], request.user)
        except ratelimits.Limited as e:
            form.add_error(None, e.detail)
            response = render(
                request, "approvals/new_run.html", {"form": form, "nav": "new_run"}, status=429
            )
            response["Retry-After"] = str(e.retry_after)
            return response
        return redirect("thread", thread_id=thread.id)
    return render(request, "approvals/new_run.html", {"form": form, "nav": "new_run"})
