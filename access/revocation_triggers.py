"""The triggers that move the revocation counter (access.models.RevocationCounter).

Each adds one to the counter in the transaction of a change that takes a credential away: a
token's revoked_at or expires_at changed, or the token deleted; a user deactivated or deleted;
a session deleted (a logout flushes it) or its expiry brought forward. Being triggers, they
count whatever made the change: an action, the admin, a queryset update, raw SQL. The count is
an upsert, so an emptied table (a test's flush) starts again.

They are installed after every migrate (approvals.apps), not by a migration alone: SQLite
alters a table by building a new one, which drops its triggers, and later migrations of auth,
sessions or approvals may do that to these tables.
"""

from typing import Any

from django.contrib.auth import get_user_model
from django.contrib.sessions.models import Session
from django.db import connections

from access.models import REVOCATION_COUNTER, ApiToken, RevocationCounter

FUNCTION = "approvals_count_revocation"


def triggers() -> list[tuple[str, str, str, str]]:
    """(name, event, table, condition) of each trigger."""
    token = ApiToken._meta.db_table
    user = get_user_model()._meta.db_table
    session = Session._meta.db_table
    return [
        (
            "approvals_revocation_token_changed",
            "UPDATE OF revoked_at, expires_at",
            token,
            "NEW.revoked_at IS DISTINCT FROM OLD.revoked_at"
            " OR NEW.expires_at IS DISTINCT FROM OLD.expires_at",
        ),
        ("approvals_revocation_token_deleted", "DELETE", token, ""),
        (
            "approvals_revocation_user_deactivated",
            "UPDATE OF is_active",
            user,
            "OLD.is_active AND NOT NEW.is_active",
        ),
        ("approvals_revocation_user_deleted", "DELETE", user, ""),
        ("approvals_revocation_session_deleted", "DELETE", session, ""),
        (
            "approvals_revocation_session_shortened",
            "UPDATE OF expire_date",
            session,
            "NEW.expire_date < OLD.expire_date",
        ),
    ]


def install(sender: Any = None, using: str = "default", **kwargs: Any) -> None:
    """Create (or create again) the triggers: a post_migrate receiver."""
    connection = connections[using]
    counter = RevocationCounter._meta.db_table
    upsert = (
        f"INSERT INTO {counter} (id, count) VALUES ({REVOCATION_COUNTER}, 1)"
        f" ON CONFLICT (id) DO UPDATE SET count = {counter}.count + 1"
    )
    postgresql = connection.vendor == "postgresql"
    with connection.cursor() as cursor:
        if postgresql:
            cursor.execute(
                f"CREATE OR REPLACE FUNCTION {FUNCTION}() RETURNS trigger LANGUAGE plpgsql"
                f" AS $$ BEGIN {upsert}; RETURN NULL; END $$"
            )
        for name, event, table, condition in triggers():
            when = f" WHEN ({condition})" if condition else ""
            if postgresql:
                body = f"EXECUTE FUNCTION {FUNCTION}()"
                cursor.execute(f"DROP TRIGGER IF EXISTS {name} ON {table}")
            else:
                # SQLite spells IS DISTINCT FROM as IS NOT, and a trigger has a body of its own.
                when = when.replace("IS DISTINCT FROM", "IS NOT")
                body = f"BEGIN {upsert}; END"
                cursor.execute(f"DROP TRIGGER IF EXISTS {name}")
            cursor.execute(
                f"CREATE TRIGGER {name} AFTER {event} ON {table} FOR EACH ROW{when} {body}"
            )
