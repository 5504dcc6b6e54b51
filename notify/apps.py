"""Email to reviewers: new requests, reminders and escalations, read from the Event table."""

from django.apps import AppConfig


class NotifyConfig(AppConfig):
    name = "notify"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self) -> None:
        from notify import checks  # noqa: F401 - registering is the import
