"""What a token's scopes let it do (access.models.Scope), for the REST API and A2A alike.

A browser session has no scopes: its user's permissions alone apply, as before tokens had
scopes. A token needs, besides its user's permission, the scope of the call:

- `runs`: start a run (`POST /api/threads`, A2A SendMessage of a new task); read, list,
  reply to and cancel the runs its user started (REST and A2A).
- `read`: read and list every run, suspension and event (and A2A task); the events socket
  `/ws/events/`, which streams every run.
- `decide`: decide suspensions and answer questions (resumeExecution, A2A decisions and
  answers), extend deadlines, reply to and cancel any run; list and read suspensions.
- `admin`: the staff APIs, `/api/webhooks` and `/api/metrics/conversations`.

Without `read`, a token lists only the runs (and their suspensions and events) its user
started, and reading another's answers 403 naming `read`.
A call without the scope it needs answers 403 `insufficient_scope`, naming it.
"""

from typing import Any

from django.http import JsonResponse

from access.models import Scope
from infra.answers import error

# What a call needs: one scope, or a tuple of scopes any of which will do.
Needed = str | tuple[str, ...]


def token_of(user: Any) -> Any:
    """The ApiToken the user came with (access.auth.bearer), None for a session."""
    return getattr(user, "api_token", None)


def has(user: Any, scope: str) -> bool:
    token = token_of(user)
    return token is None or scope in token.scopes


def allows(user: Any, needed: Needed) -> bool:
    wanted = (needed,) if isinstance(needed, str) else needed
    return any(has(user, s) for s in wanted)


def own_runs_only(user: Any) -> bool:
    """A token without `read`: it sees only the runs its user started (its `runs` scope)."""
    return not has(user, Scope.READ)


def owns(user: Any, thread: Any) -> bool:
    return thread.created_by_id is not None and thread.created_by_id == user.pk


def may_see(user: Any, thread: Any) -> bool:
    return not own_runs_only(user) or owns(user, thread)


def may_steer(user: Any, thread: Any) -> bool:
    """Reply to or cancel the run: `decide` for any run, `runs` for the user's own."""
    return has(user, Scope.DECIDE) or (has(user, Scope.RUNS) and owns(user, thread))


def names(needed: Needed) -> str:
    wanted = (needed,) if isinstance(needed, str) else needed
    return " or ".join(str(s) for s in wanted)


def insufficient(needed: Needed, detail: str = "") -> JsonResponse:
    """403 naming the scope the call needs (RFC 6750's insufficient_scope)."""
    wanted = names(needed)
    response = error(
        403,
        "insufficient_scope",
        detail or f"This token lacks the scope this needs: {wanted}.",
        scope=wanted,
    )
    listed = " ".join((needed,) if isinstance(needed, str) else needed)
    response["WWW-Authenticate"] = f'Bearer error="insufficient_scope", scope="{listed}"'
    return response
