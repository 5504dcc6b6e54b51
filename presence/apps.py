"""Claim and presence: who is reviewing a request, and who else is looking at it right now."""

from django.apps import AppConfig


class PresenceConfig(AppConfig):
    name = "presence"
    default_auto_field = "django.db.models.BigAutoField"
