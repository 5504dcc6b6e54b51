"""`python manage.py demo_reviewer`: a reviewer for local use, with a fresh password and token.

Each run revokes the tokens the previous runs made (named TOKEN_NAME): only the token printed
last works, so the tokens of old `make run`s do not pile up valid. A token's value is stored
only as a digest, so the old one cannot be shown again instead."""

import secrets
from typing import Any

from django.contrib.auth import get_user_model
from django.contrib.auth.models import Group
from django.core.management.base import BaseCommand

from access import tokens
from access.models import ApiToken, Scope
from access.permissions import REVIEWERS

TOKEN_NAME = "make run"


class Command(BaseCommand):
    help = "Create (or reset) the demo reviewer and print its login and a new API token."

    def add_arguments(self, parser: Any) -> None:
        parser.add_argument("--username", default="reviewer")

    def handle(self, *args: Any, **options: Any) -> None:
        User = get_user_model()
        user, _ = User.objects.get_or_create(username=options["username"])
        password = secrets.token_urlsafe(9)
        user.set_password(password)
        # A reviewer decides; the audit trail and the admin are for `manage.py demo_admin`.
        user.is_staff = False
        user.save()
        user.groups.add(Group.objects.get(name=REVIEWERS))
        # The scopes of the docs' walk-throughs: start runs, read them, decide. Not admin:
        # the demo reviewer is not staff, so the staff APIs would refuse it anyway.
        old = ApiToken.objects.filter(user=user, name=TOKEN_NAME, revoked_at__isnull=True)
        revoked = sum(tokens.revoke(t) for t in old)
        _, token = tokens.create(user, TOKEN_NAME, [Scope.RUNS, Scope.READ, Scope.DECIDE])
        self.stdout.write(f"Login:    {user.username} / {password}")
        self.stdout.write("          decides in the inbox at /; not staff: no /admin/ or /audit/")
        self.stdout.write(f"Token:    {token}")
        self.stdout.write("          scopes runs, read, decide: start, read and decide runs")
        if revoked:
            self.stdout.write(f"          (the previous demo token{'s' * (revoked > 1)} revoked)")
