"""`python manage.py demo_reviewer`: a reviewer for local use, with a fresh password and token."""

import secrets
from typing import Any

from django.contrib.auth import get_user_model
from django.contrib.auth.models import Group
from django.core.management.base import BaseCommand

from approvals.models import ApiToken
from approvals.permissions import REVIEWERS


class Command(BaseCommand):
    help = "Create (or reset) the demo reviewer and print its login and a new API token."

    def add_arguments(self, parser: Any) -> None:
        parser.add_argument("--username", default="reviewer")

    def handle(self, *args: Any, **options: Any) -> None:
        User = get_user_model()
        user, _ = User.objects.get_or_create(username=options["username"])
        password = secrets.token_urlsafe(9)
        user.set_password(password)
        user.is_staff = True  # the demo reviewer may read the audit trail
        user.save()
        user.groups.add(Group.objects.get(name=REVIEWERS))
        _, token = ApiToken.issue(user, "make run")
        self.stdout.write(f"Login:    {user.username} / {password}")
        self.stdout.write(f"Token:    {token}")
