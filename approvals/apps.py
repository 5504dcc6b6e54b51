"""The human side: the decision API, sockets, pages and the audit trail."""

from django.apps import AppConfig


class ApprovalsConfig(AppConfig):
    name = "approvals"
    default_auto_field = "django.db.models.BigAutoField"
