"""`python manage.py create_api_token USERNAME [--scope S ...] [--expires WHEN] [--name N]`:
print a new bearer token, once."""

from typing import Any

from django.contrib.auth import get_user_model
from django.core.management.base import BaseCommand, CommandError

from access import tokens
from access.models import ALL_SCOPES


class Command(BaseCommand):
    help = (
        "Create an API token for a user and print it. It is stored hashed and shown only now. "
        "Without --scope it has every scope: it may do whatever its user may."
    )

    def add_arguments(self, parser: Any) -> None:
        parser.add_argument("username")
        parser.add_argument("--name", default="", help="A label to tell tokens apart")
        parser.add_argument(
            "--scope",
            action="append",
            choices=ALL_SCOPES,
            dest="scopes",
            help="What the token may do (repeat for several): runs, decide, read, admin",
        )
        parser.add_argument(
            "--expires",
            help="When it stops working: a duration (90m, 12h, 30d, 2w), an ISO date "
            "(2027-01-31, at 00:00 UTC) or date and time (2027-01-31T18:00:00+01:00)",
        )

    def handle(self, *args: Any, **options: Any) -> None:
        user = get_user_model().objects.filter(username=options["username"]).first()
        if user is None:
            raise CommandError(f"No user named {options['username']!r}.")
        expires_at = None
        if options["expires"]:
            try:
                expires_at = tokens.parse_expiry(options["expires"])
            except ValueError as e:
                raise CommandError(f"--expires: {e}") from e
        _, raw = tokens.create(user, options["name"], options["scopes"], expires_at)
        self.stdout.write(raw)
