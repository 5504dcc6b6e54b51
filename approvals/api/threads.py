"""Runs: start and list them (/api/threads), read one, cancel one."""

import functools
from typing import Any

from django.http import HttpRequest, JsonResponse

from access import admission, ratelimits, scopes
from access.auth import api
from access.models import Scope
from agents import cancelling, starting, statements
from agents.models import Thread
from approvals import schemas as shapes
from approvals.api.bodies import StartRun
from approvals.api.paging import keyset_page
from approvals.api.payloads import thread_payload, waiting_for_person
from approvals.contract import parse
from approvals.http import BadRequest, bad_request, error, json_body, not_found, parse_uuid
from approvals.openapi import operation


def thread_or_404(thread_id: str) -> Thread | None:
    pk = parse_uuid(thread_id)
    if pk is None:
        return None
    return Thread.objects.select_related("agent").filter(pk=pk).first()


# A runs-only token sees its user's own runs (access.scopes); these say so when it asks
# for another's.
SEE_OTHERS = "This token may read only the runs its user started: another's needs read."
STEER_OTHERS = "This token may steer only the runs its user started: another's needs decide."


def visible_threads(request: HttpRequest, rows: Any, field: str = "created_by") -> Any:
    """`rows` as the caller may list them: all, or a runs-only token's own runs."""
    if scopes.own_runs_only(request.user):
        return rows.filter(**{field: request.user})
    return rows


@operation(
    "POST",
    "Start a run",
    body=StartRun,
    responses={201: shapes.Thread},
    description="Start a run of an agent; a worker runs it. 429 when too many are started too "
    "fast or the agent has MAX_PENDING_PER_AGENT requests waiting.",
)
@operation(
    "GET",
    "List runs",
    query=shapes.ThreadQuery,
    responses={200: shapes.ThreadPage},
    description="Newest first, a page at a time: follow `next` (a keyset cursor). A token "
    "without the read scope lists only the runs its user started.",
)
@api(
    ["GET", "POST"],
    perm=None,
    scope={"GET": (Scope.READ, Scope.RUNS), "POST": Scope.RUNS},
    limit=ratelimits.RUNS,
)
def threads(request: HttpRequest) -> JsonResponse:
    if request.method == "GET":
        if not request.user.has_perm("agents.view_thread"):
            return error(403, "forbidden", "You do not have permission to do this.")
        return _thread_list(request)
    if not request.user.has_perm("agents.add_thread"):
        return error(403, "forbidden", "You do not have permission to start runs.")
    # The agent is looked up once, while the body is checked (StartRun names an unknown one).
    agent_named = functools.cache(statements.agent_named)
    try:
        body = parse(StartRun, json_body(request), agent_named=agent_named)
    except BadRequest as e:
        return bad_request(e)
    agent, message = agent_named(body.agent), body.message
    try:
        with admission.admitted(agent):
            thread = starting.start_thread(agent, message, request.user)
    except ratelimits.Limited as e:
        return ratelimits.too_many(e)
    return JsonResponse(thread_payload(thread), status=201)


def _thread_list(request: HttpRequest) -> JsonResponse:
    """GET /api/threads: newest first, filtered by ?status= and ?waiting=, a page of ?limit=
    at a time; `next` carries a keyset cursor (created_at, id), so a page never repeats or
    skips a run that starts meanwhile."""
    q = request.GET
    rows = visible_threads(request, Thread.objects.select_related("agent"))
    try:
        status = q.get("status")
        if status:
            if status not in Thread.Status.values:
                raise BadRequest(
                    "Unknown status.", {"status": f"One of {', '.join(Thread.Status.values)}."}
                )
            rows = rows.filter(status=status)
        waiting = q.get("waiting")
        if waiting not in (None, "", "0", "false", "1", "true"):
            raise BadRequest("Bad waiting.", {"waiting": "1 or true (or 0 or false)."})
        if waiting in ("1", "true"):
            # What waits for a person: a reply, or a decision (also one inside an agent
            # instance while the thread runs on); A2A's input-required tasks are these.
            rows = rows.filter(waiting_for_person()).distinct()
        page, next_url = keyset_page(request, rows, newest_first=True)
    except BadRequest as e:
        return bad_request(e)
    results = [
        {
            "id": str(t.id),
            "agent": t.agent.name,
            "status": t.status,
            "title": t.title,
            "created_at": t.created_at.isoformat(),
            "input_prompt": t.input_prompt or None,
            "input_expires_at": t.input_expires_at.isoformat() if t.input_expires_at else None,
        }
        for t in page
    ]
    return JsonResponse({"results": results, "next": next_url})


@operation("GET", "One run", responses={200: shapes.Thread})
@api(["GET"], perm="agents.view_thread", scope=(Scope.READ, Scope.RUNS))
def thread_detail(request: HttpRequest, thread_id: str) -> JsonResponse:
    thread = thread_or_404(thread_id)
    if thread is None:
        return not_found("thread")
    if not scopes.may_see(request.user, thread):
        return scopes.insufficient(Scope.READ, SEE_OTHERS)
    return JsonResponse(thread_payload(thread))


@operation(
    "POST",
    "Cancel a run",
    responses={200: shapes.Thread},
    errors=(409,),
    description=(
        "Cancel its pending suspensions and unwind the stack: the run is `cancelled`. While a "
        "tool runs, it is `cancelling` until that tool's result is recorded, then `cancelled`; "
        "the answer does not wait. 409 once it has ended."
    ),
)
@api(["POST"], perm="agents.change_thread", scope=(Scope.RUNS, Scope.DECIDE))
def thread_cancel(request: HttpRequest, thread_id: str) -> JsonResponse:
    thread = thread_or_404(thread_id)
    if thread is None:
        return not_found("thread")
    if not scopes.may_steer(request.user, thread):
        return scopes.insufficient(Scope.DECIDE, STEER_OTHERS)
    try:
        thread = cancelling.cancel_thread(thread.pk, request.user)
    except cancelling.AlreadyFinished as e:
        return error(
            409,
            "already_finished",
            f"The thread has already ended ({e.args[0]}).",
            status=str(e.args[0]),
        )
    return JsonResponse(thread_payload(Thread.objects.get(pk=thread.pk)))
