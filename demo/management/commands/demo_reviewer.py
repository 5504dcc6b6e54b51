"""`python manage.py demo_reviewer`: a reviewer for local use, with a fresh password and token
(demo.accounts; the previous demo tokens revoked)."""

from typing import Any

from django.core.management.base import BaseCommand

from demo import accounts


class Command(BaseCommand):
    help = "Create (or reset) the demo reviewer and print its login and a new API token."

    def add_arguments(self, parser: Any) -> None:
        parser.add_argument("--username", default="reviewer")

    def handle(self, *args: Any, **options: Any) -> None:
        for line in accounts.reviewer(options["username"]).lines():
            self.stdout.write(line)
