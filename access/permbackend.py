"""Django's ModelBackend, with a user's permissions read in one statement instead of two."""

from typing import Any

from django.contrib.auth.backends import ModelBackend
from django.contrib.auth.models import Permission
from django.db.models import QuerySet

from infra.compiled import Compiled


def _named(rows: QuerySet) -> QuerySet:
    return rows.values_list("content_type__app_label", "codename").order_by()


# Compiled once per process (infra.compiled): every API request reads these.
_ALL = Compiled(lambda: _named(Permission.objects.all()))
_OWN_AND_GROUPS = Compiled(
    lambda user: _named(Permission.objects.filter(user=user)).union(
        _named(Permission.objects.filter(group__user=user))
    ),
    -7331,  # stands for the user's id
)


class OneQueryModelBackend(ModelBackend):
    """ModelBackend reads a user's own permissions and their groups' in two statements, on
    every request that checks one (bench/README.md: each API request does). This reads both
    with one UNION, compiled once (infra.compiled), and fills the same per-object cache;
    everything else (authentication, inactive users, superusers, object permissions) is
    ModelBackend's, unchanged. Subclassed rather than replaced because no maintained package
    does only this."""

    def get_all_permissions(self, user_obj: Any, obj: Any = None) -> set[str]:
        if not user_obj.is_active or user_obj.is_anonymous or obj is not None:
            return set()
        if not hasattr(user_obj, "_perm_cache"):
            db = user_obj._state.db or "default"
            if user_obj.is_superuser:
                pairs = _ALL.rows(using=db)
            else:
                pairs = _OWN_AND_GROUPS.rows(user_obj.pk, using=db)
            user_obj._perm_cache = {f"{app}.{codename}" for app, codename in pairs}
        return user_obj._perm_cache
