"""`python manage.py create_api_token USERNAME`: print a new bearer token, once."""

from typing import Any

from django.contrib.auth import get_user_model
from django.core.management.base import BaseCommand, CommandError

from approvals.models import ApiToken


class Command(BaseCommand):
    help = "Create an API token for a user and print it. It is stored hashed and shown only now."

    def add_arguments(self, parser: Any) -> None:
        parser.add_argument("username")
        parser.add_argument("--name", default="", help="A label to tell tokens apart")

    def handle(self, *args: Any, **options: Any) -> None:
        user = get_user_model().objects.filter(username=options["username"]).first()
        if user is None:
            raise CommandError(f"No user named {options['username']!r}.")
        _, raw = ApiToken.issue(user, options["name"])
        self.stdout.write(raw)
