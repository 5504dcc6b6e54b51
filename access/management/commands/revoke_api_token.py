"""`python manage.py revoke_api_token ID_OR_PREFIX`: a token stops working at once."""

from typing import Any

from django.core.management.base import BaseCommand, CommandError

from access import tokens
from access.models import ApiToken, digest

PREFIX_CHARS = 12  # ApiToken.prefix's length at most


class Command(BaseCommand):
    help = (
        "Revoke an API token, named by its id or its prefix (list_api_tokens shows both). Its "
        "next request is refused and its open sockets close; the row stays for the trail."
    )

    def add_arguments(self, parser: Any) -> None:
        parser.add_argument("token", help="Its id, or its prefix (gw_…, 6 characters at least)")

    def handle(self, *args: Any, **options: Any) -> None:
        named = options["token"].strip().rstrip("…")
        rows = ApiToken.objects.select_related("user")
        if named.isdigit():
            found = list(rows.filter(pk=int(named)))
        elif len(named) > PREFIX_CHARS:
            found = list(rows.filter(digest=digest(named)))  # the whole token was given
        else:
            found = list(rows.filter(prefix__startswith=named)) if len(named) >= 6 else []
        if not found:
            raise CommandError(f"No token {named!r}.")
        if len(found) > 1:
            ids = ", ".join(str(t.pk) for t in found)
            raise CommandError(f"{named!r} names several tokens ({ids}): give the id.")
        [token] = found
        if tokens.revoke(token):
            self.stdout.write(f"Revoked {token.prefix}… ({token.user.username}, id {token.pk}).")
        else:
            self.stdout.write(f"{token.prefix}… was already revoked.")
