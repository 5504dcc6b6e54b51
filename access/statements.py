"""The statements every API request makes to learn who is calling, compiled once per process.

Each sits behind a function named for what it reads (`token_with_user`, `permission_names`),
so access.auth and access.permbackend call the function and never see infra.compiled.
The sentinels are values no real row has.
"""

from typing import Any

from django.contrib.auth import get_user_model
from django.contrib.auth.models import Permission
from django.contrib.postgres.expressions import ArraySubquery
from django.db import connections
from django.db.models import CharField, OuterRef, QuerySet, Value
from django.db.models.functions import Concat

from access.models import ApiToken
from infra.compiled import Compiled, fields

_TOKEN_FIELDS = fields(ApiToken)
_USER_FIELDS = fields(get_user_model())
# The token and its user in one statement.
_TOKEN_ROW = Compiled(
    lambda wanted: (
        ApiToken.objects.filter(digest=wanted)
        .values_list(*_TOKEN_FIELDS, *(f"user__{name}" for name in _USER_FIELDS))
        .order_by()[:1]
    ),
    "(sentinel: a digest)",
)


def _dotted_names(rows: QuerySet[Any, Any]) -> QuerySet[Any, Any]:
    dotted = Concat("content_type__app_label", Value("."), "codename", output_field=CharField())
    named: QuerySet[Any, Any] = rows.annotate(dotted=dotted).values("dotted").order_by()
    return named


# On PostgreSQL, the user's permissions in the same statement, as two arrays (their own,
# their groups'): each API request checks one, and this spares it a statement of its own.
_TOKEN_ROW_AND_PERMISSIONS = Compiled(
    lambda wanted: (
        ApiToken.objects.filter(digest=wanted)
        .annotate(
            own=ArraySubquery(_dotted_names(Permission.objects.filter(user=OuterRef("user")))),
            via_groups=ArraySubquery(
                _dotted_names(Permission.objects.filter(group__user=OuterRef("user")))
            ),
        )
        .values_list(
            *_TOKEN_FIELDS, *(f"user__{name}" for name in _USER_FIELDS), "own", "via_groups"
        )
        .order_by()[:1]
    ),
    "(sentinel: a digest)",
)


def token_with_user(digest: str) -> tuple[ApiToken, set[str] | None] | None:
    """The token with this digest, its user loaded with it (select_related's result), and on
    PostgreSQL the user's permission names ("app_label.codename", their own and their
    groups'); None in their place on SQLite, which has no arrays. None: no such token."""
    with_permissions = connections["default"].vendor == "postgresql"
    rows = (_TOKEN_ROW_AND_PERMISSIONS if with_permissions else _TOKEN_ROW).rows(digest)
    if not rows:
        return None
    n, m = len(_TOKEN_FIELDS), len(_TOKEN_FIELDS) + len(_USER_FIELDS)
    token = ApiToken.from_db("default", _TOKEN_FIELDS, rows[0][:n])
    token.user = get_user_model().from_db("default", _USER_FIELDS, rows[0][n:m])
    return token, ({*rows[0][m], *rows[0][m + 1]} if with_permissions else None)


def _app_and_codename(rows: QuerySet[Any, Any]) -> QuerySet[Any, Any]:
    return rows.values_list("content_type__app_label", "codename").order_by()


_ALL_PERMISSIONS = Compiled(lambda: _app_and_codename(Permission.objects.all()))
# A user's own permissions and their groups' in one UNION.
_OWN_AND_GROUPS = Compiled(
    lambda user: _app_and_codename(Permission.objects.filter(user=user)).union(
        _app_and_codename(Permission.objects.filter(group__user=user))
    ),
    -7331,  # stands for the user's id
)


def permission_names(user_id: Any, using: str = "default") -> set[str]:
    """The names ("app_label.codename") of the user's permissions, their own and their
    groups'; of every permission when `user_id` is None (a superuser has them all)."""
    if user_id is None:
        pairs = _ALL_PERMISSIONS.rows(using=using)
    else:
        pairs = _OWN_AND_GROUPS.rows(user_id, using=using)
    return {f"{app}.{codename}" for app, codename in pairs}
