"""GET /api/events/{id}: one whole event, for clients that got its summary over the socket."""

from django.http import HttpRequest, JsonResponse

from agents.models import Event
from approvals import scopes
from approvals.auth import api
from approvals.http import error, whole_number
from approvals.models import Scope
from approvals.openapi import operation
from approvals.schemas import Event as EventShape


@operation("GET", "One whole event", responses={200: EventShape})
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
