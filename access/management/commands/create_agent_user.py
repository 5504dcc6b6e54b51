"""`python manage.py create_agent_user USERNAME [--group G ...]`: a user for an agent or an MCP
client: it may start runs and raise requests (the caller permissions of access.permissions),
read, reply to and cancel its own, and decides nothing. A new one has no password: it calls with
API tokens (`create_api_token USERNAME --scope runs`)."""

from typing import Any

from django.contrib.auth import get_user_model
from django.contrib.auth.models import Group, Permission
from django.core.management.base import BaseCommand
from django.db import transaction

from access.permissions import CALLER_PERMISSIONS


class Command(BaseCommand):
    help = (
        "Create (or give the permissions to) a user that may start runs and raise requests, "
        "for an agent's or an MCP client's API token; it decides nothing."
    )

    def add_arguments(self, parser: Any) -> None:
        parser.add_argument("username")
        parser.add_argument(
            "--group",
            action="append",
            default=[],
            dest="groups",
            help="a group to add it to, made if missing (an MCP server's `callers`); repeat for "
            "several",
        )

    @transaction.atomic
    def handle(self, *args: Any, **options: Any) -> None:
        user, created = get_user_model().objects.get_or_create(username=options["username"])
        if created:
            user.set_unusable_password()
            user.save(update_fields=["password"])
        user.user_permissions.add(
            *Permission.objects.filter(
                content_type__app_label="agents",
                codename__in=[code for _, code in CALLER_PERMISSIONS],
            )
        )
        for name in options["groups"]:
            user.groups.add(Group.objects.get_or_create(name=name)[0])
        self.stdout.write(
            f"{'Created' if created else 'Updated'} {user.get_username()}: it may start runs and "
            "raise requests, and decides nothing. Its token: "
            f"create_api_token {user.get_username()} --scope runs"
        )
