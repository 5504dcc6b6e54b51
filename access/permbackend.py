"""Django's ModelBackend, with a user's permissions read in one statement instead of two."""

from typing import Any

from django.contrib.auth.backends import ModelBackend

from access import statements


class OneQueryModelBackend(ModelBackend):
    """ModelBackend reads a user's own permissions and their groups' in two statements, on
    every request that checks one (each API request does). This reads both with one UNION
    (access.statements.permission_names), and fills the same per-object cache; everything
    else (authentication, inactive users, superusers, object permissions) is ModelBackend's,
    unchanged. Subclassed rather than replaced because no maintained package does only
    this."""

    def get_all_permissions(self, user_obj: Any, obj: Any = None) -> set[str]:
        if not user_obj.is_active or user_obj.is_anonymous or obj is not None:
            return set()
        if not hasattr(user_obj, "_perm_cache"):
            user_id = None if user_obj.is_superuser else user_obj.pk
            names = statements.permission_names(user_id, using=user_obj._state.db or "default")
            remember_permissions(user_obj, names)
        return user_obj._perm_cache


def remember_permissions(user: Any, names: set[str]) -> None:
    """Give `user` these permission names without asking the database again: ModelBackend's
    own cache on the user object (`_perm_cache`, which Django's ModelBackend reads first and
    code that changes permissions deletes), filled as ModelBackend fills it."""
    user._perm_cache = names
