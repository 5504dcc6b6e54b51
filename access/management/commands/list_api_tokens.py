"""`python manage.py list_api_tokens [USERNAME] [--all]`: the tokens, never their values."""

from typing import Any

from django.core.management.base import BaseCommand

from access.models import ApiToken


def _when(value: Any) -> str:
    return value.strftime("%Y-%m-%d %H:%M") if value else "-"


class Command(BaseCommand):
    help = "List API tokens (id, prefix, user, name, scopes, status, expiry, last use)."

    def add_arguments(self, parser: Any) -> None:
        parser.add_argument("username", nargs="?", help="Only this user's tokens")
        parser.add_argument(
            "--all", action="store_true", help="Revoked and expired ones too (kept for the trail)"
        )

    def handle(self, *args: Any, **options: Any) -> None:
        rows = ApiToken.objects.select_related("user").order_by("user__username", "-created_at")
        if options["username"]:
            rows = rows.filter(user__username=options["username"])
        columns = ("ID", "PREFIX", "USER", "NAME", "SCOPES", "STATUS", "EXPIRES", "LAST USED")
        lines = []
        for t in rows:
            if t.status != "active" and not options["all"]:
                continue
            lines.append(
                (
                    str(t.pk),
                    f"{t.prefix}…",
                    t.user.username,
                    t.name or "-",
                    ",".join(t.scopes) or "-",
                    t.status,
                    _when(t.expires_at),
                    _when(t.last_used_at),
                )
            )
        widths = [max(len(c), *(len(line[i]) for line in lines)) for i, c in enumerate(columns)]
        for line in [columns, *lines]:
            self.stdout.write("  ".join(v.ljust(w) for v, w in zip(line, widths, strict=True)))
