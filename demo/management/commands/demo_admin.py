"""`python manage.py demo_admin`: an administrator for local use, with a fresh password
(demo.accounts)."""

from typing import Any

from django.core.management.base import BaseCommand

from demo import accounts


class Command(BaseCommand):
    help = "Create (or reset) the demo administrator and print its login."

    def add_arguments(self, parser: Any) -> None:
        parser.add_argument("--username", default="admin")

    def handle(self, *args: Any, **options: Any) -> None:
        for line in accounts.admin(options["username"]).lines():
            self.stdout.write(line)
