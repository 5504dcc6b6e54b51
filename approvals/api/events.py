"""The event log: GET /api/events after a cursor, and one whole event (GET /api/events/{id})."""

from django.http import HttpRequest, JsonResponse

from access import scopes
from access.auth import api
from access.models import Scope
from agents.models import Event
from approvals import schemas as shapes
from approvals.api.paging import MAX_PAGE_SIZE, page_limit
from approvals.api.threads import visible_threads
from approvals.http import BadRequest, bad_request, error, parse_uuid, row_id, whole_number
from approvals.openapi import operation


@operation(
    "GET",
    "The event log",
    query=shapes.EventQuery,
    responses={200: shapes.EventPage},
    description="The audit trail in id order, after `after`; page on with `last_id`.",
)
@api(["GET"], perm="agents.view_thread", scope=(Scope.READ, Scope.RUNS))
def event_list(request: HttpRequest) -> JsonResponse:
    q = request.GET
    after = row_id(q.get("after", "0"))
    if after is None:
        return error(400, "invalid", "Bad cursor.", {"after": "An event id (a whole number)."})
    try:
        limit = page_limit(request) if "limit" in q else MAX_PAGE_SIZE
    except BadRequest as e:
        return bad_request(e)
    rows = visible_threads(request, Event.objects.filter(id__gt=after), "thread__created_by")
    rows = rows.order_by("id")
    if q.get("thread"):
        pk = parse_uuid(q["thread"])
        if pk is None:
            return error(400, "invalid", "Bad thread id.", {"thread": "A thread id (UUID)."})
        rows = rows.filter(thread_id=pk)
    page = list(rows[:limit])
    return JsonResponse(
        {
            "events": [e.as_message() for e in page],
            "last_id": page[-1].id if page else after,
        }
    )


@operation("GET", "One whole event", responses={200: shapes.Event})
@api(["GET"], perm="agents.view_thread", scope=(Scope.READ, Scope.RUNS))
def event_detail(request: HttpRequest, event_id: str) -> JsonResponse:
    pk = whole_number(event_id)
    found = pk is not None and pk < 2**63  # beyond a bigint no row can match
    event = Event.objects.filter(pk=pk).first() if found else None
    if event is None:
        return error(404, "not_found", "No such event.")
    if scopes.own_runs_only(request.user) and not (
        event.thread is not None and scopes.owns(request.user, event.thread)
    ):
        return scopes.insufficient(
            Scope.READ, "This token may read only the events of runs its user started."
        )
    return JsonResponse(event.as_message())
