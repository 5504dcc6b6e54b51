"""Who may do what: reviewers are a group with the engine's permissions; an agent's or MCP
client's user (`create_agent_user`) has those of a caller."""

from django.core.exceptions import PermissionDenied
from django.http import HttpRequest

REVIEWERS = "reviewers"

REVIEWER_PERMISSIONS = [
    ("agents", "view_thread"),
    ("agents", "add_thread"),
    ("agents", "change_thread"),
    ("agents", "view_suspension"),
    ("agents", "decide_suspension"),
]

# A caller's: start runs and raise requests (POST /api/threads, /api/requests, MCP tool calls),
# read, reply to and cancel its own; decide nothing.
CALLER_PERMISSIONS = [p for p in REVIEWER_PERMISSIONS if p != ("agents", "decide_suspension")]


def require(request: HttpRequest, perm: str) -> None:
    """A page's permission check: 403 unless the user has `perm`."""
    if not request.user.has_perm(perm):
        raise PermissionDenied
