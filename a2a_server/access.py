"""Who may call which A2A method, and what every method starts from: the task it names.

The permissions and token scopes are the REST API's (approvals.api, access.scopes), method
by method; a caller who lacks one is refused with HTTP 403, one with no valid token with 401
(a2a_server.rpc).
"""

from typing import Any

from a2a.types import InvalidParamsError, TaskNotFoundError

from access import scopes
from access.models import Scope
from agents.models import Thread
from approvals.http import parse_uuid

VIEW = "agents.view_thread"  # GetTask, ListTasks, SubscribeToTask, push configs
START = "agents.add_thread"  # a new task; a reply to an agent that waits for input
CANCEL = "agents.change_thread"  # CancelTask; deleting another caller's push config
DECIDE = "agents.decide_suspension"  # decisions, and answers to ask_user questions


class Denied(Exception):
    """The caller may not do this: HTTP 401 (no valid credentials) or 403 (no permission)."""

    def __init__(self, status: int, message: str, scope: str = "", rule: str = "") -> None:
        super().__init__(message)
        self.status = status
        self.message = message
        self.scope = scope  # the token scope the call needs, when that is what it lacks
        self.rule = rule  # the policy's rule that refuses a decision (agents.policy.Refused)


def require(user: Any, perm: str, what: str) -> None:
    if not user.has_perm(perm):
        raise Denied(403, f"You do not have permission to {what}.")


def require_scope(user: Any, needed: scopes.Needed, what: str) -> None:
    if not scopes.allows(user, needed):
        wanted = scopes.names(needed)
        raise Denied(403, f"This token lacks the scope to {what}: {wanted}.", scope=wanted)


def see(user: Any, thread: Thread) -> None:
    """Reading a task: `read`, or `runs` for a task its user started."""
    require_scope(user, (Scope.READ, Scope.RUNS), "see tasks")
    if not scopes.may_see(user, thread):
        raise Denied(
            403,
            "This token may see only the tasks its user started: another's needs read.",
            scope=Scope.READ,
        )


def steer(user: Any, thread: Thread, what: str) -> None:
    """Replying to or cancelling a task: `decide`, or `runs` for a task its user started."""
    require_scope(user, (Scope.RUNS, Scope.DECIDE), what)
    if not scopes.may_steer(user, thread):
        raise Denied(
            403,
            f"This token may {what} only for the tasks its user started: another's needs decide.",
            scope=Scope.DECIDE,
        )


def invalid(message: str, field: str) -> InvalidParamsError:
    """Invalid params, naming the field (a google.rpc.BadRequest field violation in 1.0)."""
    return InvalidParamsError(message, data={"errors": [{"field": field, "message": message}]})


def plain(value: Any) -> Any:
    """A value read from protobuf's JSON (google.protobuf.Value) as the JSON it came from:
    protobuf keeps every number as a double, so 200 would be stored as 200.0."""
    if isinstance(value, float) and value.is_integer():
        return int(value)
    if isinstance(value, dict):
        return {k: plain(v) for k, v in value.items()}
    if isinstance(value, list):
        return [plain(v) for v in value]
    return value


def find_thread(task_id: str) -> Thread:
    pk = parse_uuid(task_id)
    thread = Thread.objects.select_related("agent").filter(pk=pk).first() if pk else None
    if thread is None:
        raise TaskNotFoundError(f"No task {task_id[:100]!r}.", data={"taskId": task_id[:100]})
    return thread
