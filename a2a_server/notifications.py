"""A2A push notifications: a task's state changes POSTed to its push configs as the A2A
specification's StreamResponse (`statusUpdate`), with the config's authentication (A2A
§4.3.3, §13.2). The states and messages are the A2A server's own (a2a_server.mapping.Fold),
so a push says what a stream of the same task says.

The A2A SDK and protobuf are imported by `push_body`, not with this module: every worker's
webhooks.fanout asks `pushed` at each sweep, and only a push needs them (issue 42)."""

from typing import Any

from a2a_server.models import PushNotificationConfig
from agents.models import Event

E = Event.Type

# The events that move a task into input-required or an end state: the ones pushed
# (webhooks.fanout makes a push delivery for each, for every push config of the task).
PUSHED = frozenset(
    {
        E.INPUT_REQUIRED,
        E.AGENT_SUSPENDED,
        E.THREAD_COMPLETED,
        E.THREAD_FAILED,
        E.THREAD_CANCELLED,
    }
)
# The header the A2A SDKs send a push config's `token` in.
TOKEN_HEADER = "X-A2A-Notification-Token"
CONTENT_TYPE = "application/a2a+json"


def pushed(event_type: str) -> bool:
    return event_type in PUSHED


def push_body(event: Event) -> dict[str, Any]:
    """The StreamResponse POSTed for `event`: the status update the A2A server's fold of the
    task's events makes at this event (its state, and what an input-required task waits for)."""
    from a2a.types import StreamResponse, TaskStatusUpdateEvent
    from google.protobuf import json_format

    from a2a_server import mapping

    task = str(event.thread_id)
    fold = mapping.Fold(task_id=task)
    made: list[Any] = []
    for e in Event.objects.filter(thread_id=event.thread_id, id__lte=event.id).order_by("id"):
        made = fold.apply(e)
    updates = [u for u in made if isinstance(u, TaskStatusUpdateEvent)]
    update = (
        updates[-1]
        if updates
        else TaskStatusUpdateEvent(
            task_id=task,
            context_id=task,
            status=mapping.status(fold.state, None, event.created_at),
        )
    )
    update.metadata.update({"eventId": str(event.id), "eventType": event.type})
    return json_format.MessageToDict(StreamResponse(status_update=update))


def push_headers(config: PushNotificationConfig) -> dict[str, str]:
    """`Authorization: <scheme> <credentials>` from the config's authentication (A2A 1.0's
    {"scheme", "credentials"}, or 0.3's {"schemes": [...], "credentials"}), and its token."""
    headers = {"Content-Type": CONTENT_TYPE}
    auth = config.authentication if isinstance(config.authentication, dict) else {}
    scheme = auth.get("scheme")
    if not scheme and isinstance(auth.get("schemes"), list) and auth["schemes"]:
        scheme = auth["schemes"][0]
    credentials = auth.get("credentials")
    if isinstance(scheme, str) and scheme and isinstance(credentials, str) and credentials:
        headers["Authorization"] = f"{scheme} {credentials}"
    if config.token:
        headers[TOKEN_HEADER] = config.token
    return headers
