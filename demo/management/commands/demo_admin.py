"""`python manage.py demo_admin`: an administrator for local use, with a fresh password."""

import secrets
from typing import Any

from django.contrib.auth import get_user_model
from django.core.management.base import BaseCommand


class Command(BaseCommand):
    help = "Create (or reset) the demo administrator and print its login."

    def add_arguments(self, parser: Any) -> None:
        parser.add_argument("--username", default="admin")

    def handle(self, *args: Any, **options: Any) -> None:
        User = get_user_model()
        user, _ = User.objects.get_or_create(username=options["username"])
        password = secrets.token_urlsafe(12)
        user.set_password(password)
        # Staff reads the audit trail (approvals.audit.staff_only) and signs in to /admin/;
        # superuser there manages users and agents. Runs stay view-only (agents.admin.ViewOnly).
        user.is_staff = True
        user.is_superuser = True
        user.is_active = True
        user.save()
        # A label of its own: tests/test_readme.py and bench/ find the reviewer's by "Login:".
        self.stdout.write(f"Admin:    {user.username} / {password}")
        self.stdout.write("          for the admin at /admin/ and the audit trail at /audit/")
