"""The demo's accounts, made or reset with fresh passwords on every `make run` (`manage.py
serve --demo`, or the demo_reviewer and demo_admin commands): a reviewer with an API token, and
an administrator.

Each reset of the reviewer revokes the tokens earlier resets made (named TOKEN_NAME): only the
token printed last works, so the tokens of old `make run`s do not pile up valid. A token's value
is stored only as a digest, so the old one cannot be shown again instead."""

import secrets
from dataclasses import dataclass

from django.contrib.auth import get_user_model
from django.contrib.auth.models import Group

from access import tokens
from access.models import ApiToken, Scope
from access.permissions import REVIEWERS

TOKEN_NAME = "make run"


@dataclass(frozen=True)
class Login:
    username: str
    password: str
    token: str = ""
    revoked: int = 0  # the earlier demo tokens this reset revoked

    def lines(self) -> list[str]:
        """The login as the demo prints it; tests/test_readme.py and bench/ read the labels
        (`Login:` and `Token:` the reviewer's, `Admin:` the administrator's)."""
        if not self.token:
            return [
                f"Admin:    {self.username} / {self.password}",
                "          for the admin at /admin/ and the audit trail at /audit/",
            ]
        plural = "s" * (self.revoked > 1)
        revoked = f" (the previous demo token{plural} revoked)" if self.revoked else ""
        return [
            f"Login:    {self.username} / {self.password}",
            "          decides in the inbox at /; not staff: no /admin/ or /audit/",
            f"Token:    {self.token}",
            f"          the reviewer's API token: scopes runs, read, decide{revoked}",
        ]


def reviewer(username: str = "reviewer") -> Login:
    """The demo reviewer, with a new password and a new token of the docs' walk-throughs'
    scopes (start runs, read them, decide); not staff, so no admin or audit trail."""
    user, _ = get_user_model().objects.get_or_create(username=username)
    password = secrets.token_urlsafe(9)
    user.set_password(password)
    user.is_staff = False
    user.save()
    user.groups.add(Group.objects.get(name=REVIEWERS))
    old = ApiToken.objects.filter(user=user, name=TOKEN_NAME, revoked_at__isnull=True)
    revoked = sum(tokens.revoke(t) for t in old)
    _, token = tokens.create(user, TOKEN_NAME, [Scope.RUNS, Scope.READ, Scope.DECIDE])
    return Login(user.username, password, token, revoked)


def admin(username: str = "admin") -> Login:
    """The demo administrator, with a new password: staff reads the audit trail
    (approvals.audit.staff_only) and signs in to /admin/; superuser there manages users and
    agents. Runs stay view-only there (agents.admin.ViewOnly). Not a reviewer."""
    user, _ = get_user_model().objects.get_or_create(username=username)
    password = secrets.token_urlsafe(12)
    user.set_password(password)
    user.is_staff = True
    user.is_superuser = True
    user.is_active = True
    user.save()
    return Login(user.username, password)
