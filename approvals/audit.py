"""The audit trail: every suspension with its timeline, filtered, exported as CSV or JSON Lines."""

import csv
import json
import uuid
from collections import defaultdict
from collections.abc import Iterator
from datetime import datetime, time
from typing import Any

from django.contrib.auth.decorators import login_required
from django.core.exceptions import PermissionDenied
from django.core.paginator import Paginator
from django.db.models import QuerySet
from django.http import HttpRequest, HttpResponse, StreamingHttpResponse
from django.shortcuts import render
from django.utils import timezone

from agents import chain, receipts
from agents.models import Event, Suspension
from approvals import excerpt
from approvals.cards import signed_with
from approvals.forms import AuditFilterForm
from approvals.templatetags.durations import duration

PAGE_SIZE = 50
EXPORT_FIELDS = [
    "id",
    "thread",
    "agent",
    "lineage",
    "tool",
    "kind",
    "status",
    "raised_at",
    "expires_at",
    "decided_at",
    "decided_by",
    "approved",
    "reason",
    "arguments",
    "modified_args",
    "response",
    "resumed_at",
    "thread_status",
    # The decision's signed receipt (agents.receipts): manage.py verify_receipts --export.
    "receipt",
]


def staff_only(view: Any) -> Any:
    """Log in first; then only staff may read the trail (403 for everyone else)."""

    @login_required
    def wrapper(request: HttpRequest, *args: Any, **kwargs: Any) -> HttpResponse:
        if not request.user.is_staff:
            raise PermissionDenied
        return view(request, *args, **kwargs)

    return wrapper


def filtered(form: AuditFilterForm) -> QuerySet[Suspension]:
    """Suspensions matching the valid filters of `form`, newest first."""
    rows = Suspension.objects.select_related("thread")
    data = form.cleaned_data if form.is_valid() else {}
    zone = timezone.get_current_timezone()
    if data.get("since"):
        rows = rows.filter(created_at__gte=datetime.combine(data["since"], time.min, zone))
    if data.get("until"):
        rows = rows.filter(created_at__lte=datetime.combine(data["until"], time.max, zone))
    for key, column in (("agent", "agent_name"), ("tool", "tool_name"), ("outcome", "status")):
        if data.get(key):
            rows = rows.filter(**{column: data[key]})
    if data.get("reviewer"):
        rows = rows.filter(decided_by_name=data["reviewer"])
    return rows.order_by("-created_at", "-id")


def record(s: Suspension) -> dict[str, Any]:
    """One suspension as an export row (CSV flattens the JSON fields to text)."""
    return {
        "id": str(s.id),
        "thread": str(s.thread_id),
        "agent": s.agent_name,
        "lineage": s.lineage,
        "tool": s.tool_name,
        "kind": s.kind,
        "status": s.status,
        "raised_at": s.created_at.isoformat(),
        "expires_at": s.expires_at.isoformat() if s.expires_at else None,
        "decided_at": s.decided_at.isoformat() if s.decided_at else None,
        "decided_by": s.decided_by_name or None,
        "approved": s.approved,
        "reason": s.reason,
        "arguments": s.tool_input,
        "modified_args": s.modified_args,
        "response": s.response,
        "resumed_at": s.resumed_at.isoformat() if s.resumed_at else None,
        "thread_status": s.thread.status,
        "receipt": s.receipt or None,
    }


def arg_diff(before: dict[str, Any], after: dict[str, Any] | None) -> list[dict[str, str]]:
    """What a reviewer's edit changed, key by key, values as JSON text."""
    if after is None:
        return []
    changes = []
    for key in sorted(set(before) | set(after), key=lambda k: (k not in before, k)):
        old, new = before.get(key), after.get(key)
        if key in before and key in after and old == new:
            continue
        change = (
            "changed" if key in before and key in after else "added" if key in after else "removed"
        )
        changes.append(
            {
                "key": key,
                "change": change,
                "before": json.dumps(old, ensure_ascii=False) if key in before else "",
                "after": json.dumps(new, ensure_ascii=False) if key in after else "",
            }
        )
    return changes


def timelines(page: list[Suspension]) -> dict[uuid.UUID, list[dict[str, Any]]]:
    """Each suspension's steps: raised, decided or timed out, resumed, and the tool's outcome."""
    steps: dict[uuid.UUID, list[dict[str, Any]]] = defaultdict(list)
    by_use = {(s.thread_id, s.tool_use_id): s.pk for s in page}
    events = Event.objects.filter(suspension_id__in=[s.pk for s in page])
    for e in events.order_by("id"):
        steps[e.suspension_id].append(_step(e))
    results = Event.objects.filter(
        type=Event.Type.TOOL_RESULT,
        thread_id__in={s.thread_id for s in page},
        payload__tool_use_id__in=[s.tool_use_id for s in page],
    )
    for e in results.order_by("id"):
        pk = by_use.get((e.thread_id, e.payload.get("tool_use_id")))
        if pk is not None:
            steps[pk].append(_step(e))
    return steps


def _step(e: Event) -> dict[str, Any]:
    p = e.payload
    labels = {
        Event.Type.AGENT_SUSPENDED: "Raised",
        Event.Type.SUSPENSION_DECIDED: "Decided",
        Event.Type.SUSPENSION_TIMEOUT: "Timed out",
        Event.Type.SUSPENSION_CANCELLED: "Cancelled",
        Event.Type.AGENT_RESUMED: "Resumed",
        Event.Type.SUSPENSION_REMINDER: "Reminder",
        Event.Type.SUSPENSION_ESCALATED: "Escalated",
        Event.Type.SUSPENSION_EXTENDED: "Deadline extended",
        Event.Type.SUSPENSION_VOTED: "Voted",
        Event.Type.SUSPENSION_IGNORED: "Ignored",
        Event.Type.SUSPENSION_REVIEWED: "Reviewed by a model",
        Event.Type.GRANT_CREATED: "Grant made",
        Event.Type.GRANT_USED: "Grant used",
        Event.Type.TOOL_RESULT: "Tool error" if p.get("is_error") else "Tool result",
    }
    detail = ""
    if e.type == Event.Type.SUSPENSION_DECIDED:
        detail = p.get("status", "") + signed_with(p.get("passkey"))
        if p.get("status") == "responded":
            detail = f"responded instead of deciding: {p.get('response', '')}"
        elif p.get("response") is not None:
            detail = f"answered: {p['response']}"
        elif p.get("reason"):
            detail = f"{detail}: {p['reason']}"
        if p.get("modifiedArgs") is not None:
            detail = f"{detail} (arguments edited)"
    elif e.type == Event.Type.SUSPENSION_VOTED:
        detail = (
            f"approved{signed_with(p.get('passkey'))} "
            f"({p.get('approvals')} of {p.get('required')} approvals)"
        )
        if p.get("edited_args") is not None:
            detail = f"{detail} (arguments edited)"
    elif e.type == Event.Type.SUSPENSION_IGNORED:
        detail = "dismissed from the inbox without deciding; the deadline still applies"
    elif e.type == Event.Type.SUSPENSION_REVIEWED:
        # A reviewing model's answer or failure (agents.reviewing): its words, cut below.
        said = p.get("error") if p.get("outcome") == "failed" else p.get("reason")
        detail = f"{p.get('model', '')} ({p.get('mode', '')}): {p.get('outcome', '')}"
        if p.get("recommendation"):
            detail = f"{detail}, {p['recommendation']}"
        if said:
            detail = f"{detail}: {said}"
    elif e.type in (Event.Type.GRANT_CREATED, Event.Type.GRANT_USED):
        # A standing grant (agents.grants): its terms, and how much of it is left.
        detail = (
            f"grant {p.get('id', '')}: {p.get('tool', '')} when {p.get('conditions_text', '')}, "
            f"{p.get('uses')} of {p.get('max_uses')} used, until {p.get('expires_at')}"
        )
    elif e.type == Event.Type.SUSPENSION_TIMEOUT:
        detail = "approved automatically" if p.get("approved") else "rejected automatically"
    elif e.type == Event.Type.TOOL_RESULT:
        detail = str(p.get("content", ""))
    elif e.type == Event.Type.AGENT_RESUMED:
        detail = f"the agent went on ({p.get('status', '')})"
    elif e.type == Event.Type.SUSPENSION_REMINDER:
        detail = f"reminder {p.get('reminder')} of {p.get('of')}, {_left(p)} before the deadline"
    elif e.type == Event.Type.SUSPENSION_ESCALATED:
        detail = f"to {p.get('escalate_to', '')}, {_left(p)} before the deadline"
    elif e.type == Event.Type.SUSPENSION_EXTENDED:
        detail = (
            f"by {duration(p.get('seconds'))}, from {p.get('old_expires_at')} to "
            f"{p.get('expires_at')}: {p.get('reason', '')}"
        )
    return {
        "id": e.id,
        "label": labels.get(e.type, e.type),
        "at": e.created_at,
        # A rule of the policy decides with no person as actor (agents.policy).
        # So does a standing grant (agents.grants).
        # A reviewing model too (agents.reviewing), named by its decision: `model:<name>`.
        "actor": e.actor_name
        or (p.get("by") if p.get("by") in ("policy", "grant") else "")
        or (p.get("decided_by") if str(p.get("decided_by") or "").startswith("model:") else ""),
        # A tool's result or a reviewer's answer may be long: cut, whole at the event's URL.
        "detail": excerpt.cut(detail, url=excerpt.event_url(e.id)),
    }


def _left(payload: dict[str, Any]) -> str:
    seconds = payload.get("seconds_left")
    return duration(seconds) if seconds else "no time"


def decider(s: Suspension) -> str:
    """Who decided, as a reader knows them: the full name, else the username (the policy, or a
    deleted user, leaves only the recorded name)."""
    user = s.decided_by
    return (user.get_full_name() if user else "") or s.decided_by_name


@staff_only
def audit_page(request: HttpRequest) -> HttpResponse:
    form = AuditFilterForm(request.GET)
    paginator = Paginator(filtered(form).select_related("decided_by"), PAGE_SIZE)
    page = paginator.get_page(request.GET.get("page"))
    steps = timelines(list(page.object_list))
    rows = [
        {
            "s": s,
            "decider": decider(s),
            "signed_with": signed_with(receipts.decider_of(s.receipt).get("passkey")),
            "timeline": steps.get(s.pk, []),
            "diff": arg_diff(s.tool_input, s.modified_args),
            "arguments": excerpt.cut(
                json.dumps(s.tool_input, indent=2, ensure_ascii=False),
                url=excerpt.suspension_url(s.pk),
            ),
            "url": excerpt.suspension_url(s.pk),
        }
        for s in page.object_list
    ]
    query = request.GET.copy()
    query.pop("page", None)
    return render(
        request,
        "approvals/audit.html",
        {
            "form": form,
            "rows": rows,
            "page": page,
            "total": paginator.count,
            "active_filters": sum(1 for name in form.fields if request.GET.get(name)),
            "query": query.urlencode(),
            "nav": "audit",
        },
    )


class _Echo:
    """A file-like sink for csv.writer: hands each line back to the streaming response."""

    def write(self, value: str) -> str:
        return value


def _export_rows(request: HttpRequest) -> Iterator[dict[str, Any]]:
    for s in filtered(AuditFilterForm(request.GET)).iterator(chunk_size=500):
        yield record(s)


def _cell(value: Any) -> Any:
    """Text a spreadsheet would run as a formula gets a leading quote (CSV injection)."""
    if isinstance(value, str) and value[:1] in ("=", "+", "-", "@", "\t", "\r"):
        return "'" + value
    return value


@staff_only
def export_csv(request: HttpRequest) -> StreamingHttpResponse:
    writer = csv.DictWriter(_Echo(), fieldnames=EXPORT_FIELDS)

    def lines() -> Iterator[str]:
        yield writer.writeheader()
        for row in _export_rows(request):
            for key in ("arguments", "modified_args"):
                row[key] = "" if row[key] is None else json.dumps(row[key], ensure_ascii=False)
            yield writer.writerow({k: _cell(v) for k, v in row.items()})

    response = StreamingHttpResponse(lines(), content_type="text/csv; charset=utf-8")
    response["Content-Disposition"] = 'attachment; filename="audit.csv"'
    return response


@staff_only
def export_jsonl(request: HttpRequest) -> StreamingHttpResponse:
    lines = (json.dumps(row, ensure_ascii=False) + "\n" for row in _export_rows(request))
    response = StreamingHttpResponse(lines, content_type="application/x-ndjson; charset=utf-8")
    response["Content-Disposition"] = 'attachment; filename="audit.jsonl"'
    return response


# The trail itself: every event with its hash chain (agents.chain), for a verifier outside
# the gateway (the recipe in docs/security.md recomputes each hash and link from the JSON
# Lines alone).
TRAIL_FIELDS = ["id", *chain.HASHED, "hash"]


def _trail_rows(request: HttpRequest) -> Iterator[dict[str, Any]]:
    """Events in id order: all, or one thread's (`thread=`), or those written between the
    dates `since` and `until` (a cut through the chains: the first row of each chain in it
    then links to a row left out)."""
    rows = Event.objects.only(*chain.COLUMNS)
    thread = request.GET.get("thread")
    if thread:
        try:
            rows = rows.filter(thread_id=uuid.UUID(thread))
        except ValueError:
            rows = rows.none()
    form = AuditFilterForm(request.GET)
    data = form.cleaned_data if form.is_valid() else {}
    zone = timezone.get_current_timezone()
    if data.get("since"):
        rows = rows.filter(created_at__gte=datetime.combine(data["since"], time.min, zone))
    if data.get("until"):
        rows = rows.filter(created_at__lte=datetime.combine(data["until"], time.max, zone))
    for e in rows.order_by("id").iterator(chunk_size=1000):
        yield {"id": e.id, **chain.event_content(e), "hash": e.hash}


@staff_only
def trail_csv(request: HttpRequest) -> StreamingHttpResponse:
    """The CSV quotes cells a spreadsheet would run (a leading quote), as the suspensions'
    export does: check the chain from the JSON Lines, which keep every value as hashed."""
    writer = csv.DictWriter(_Echo(), fieldnames=TRAIL_FIELDS)

    def lines() -> Iterator[str]:
        yield writer.writeheader()
        for row in _trail_rows(request):
            row["payload"] = json.dumps(row["payload"], ensure_ascii=False)
            yield writer.writerow({k: _cell(v) for k, v in row.items()})

    response = StreamingHttpResponse(lines(), content_type="text/csv; charset=utf-8")
    response["Content-Disposition"] = 'attachment; filename="audit-events.csv"'
    return response


@staff_only
def trail_jsonl(request: HttpRequest) -> StreamingHttpResponse:
    lines = (json.dumps(row, ensure_ascii=False) + "\n" for row in _trail_rows(request))
    response = StreamingHttpResponse(lines, content_type="application/x-ndjson; charset=utf-8")
    response["Content-Disposition"] = 'attachment; filename="audit-events.jsonl"'
    return response
