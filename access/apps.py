"""Who is calling: tokens and scopes, the reviewers' permissions, revocation, rate limits and the
login lockout."""

from typing import Any

from django.apps import AppConfig
from django.db.models.signals import post_migrate


def ensure_reviewers_group(sender: Any, using: str = "default", **kwargs: Any) -> None:
    """The reviewers group and its permissions; after every migrate (and every test flush)."""
    from django.contrib.auth.models import Group, Permission

    from access.permissions import REVIEWER_PERMISSIONS, REVIEWERS

    group, _ = Group.objects.using(using).get_or_create(name=REVIEWERS)
    perms = [
        Permission.objects.using(using).filter(content_type__app_label=app, codename=code).first()
        for app, code in REVIEWER_PERMISSIONS
    ]
    group.permissions.add(*[p for p in perms if p is not None])


class AccessConfig(AppConfig):
    name = "access"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self) -> None:
        from access.revocation import connect_signals
        from access.revocation_triggers import install

        post_migrate.connect(ensure_reviewers_group, sender=self)
        post_migrate.connect(install, sender=self, dispatch_uid="revocation-triggers")
        connect_signals()
