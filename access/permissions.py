"""Who may do what: reviewers are a group with the engine's permissions."""

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


def require(request: HttpRequest, perm: str) -> None:
    """A page's permission check: 403 unless the user has `perm`."""
    if not request.user.has_perm(perm):
        raise PermissionDenied
