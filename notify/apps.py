"""Email to reviewers: new requests, reminders and escalations, read from the Event table."""

from django.apps import AppConfig


class NotifyConfig(AppConfig):
    name = "notify"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self) -> None:
        from agents import events
        from notify import (
            checks,  # noqa: F401 - registering is the import
            outbox,
        )

        events.committed.connect(outbox.nudge, dispatch_uid="notify.outbox.nudge")
        # An opt-in saved or deleted in this process: its nudges ask again at once.
        from django.db.models.signals import post_delete, post_save

        from notify.models import EmailOptIn

        for signal in (post_save, post_delete):
            signal.connect(
                outbox.anyone_known.forget, sender=EmailOptIn, dispatch_uid=f"notify.known.{signal}"
            )
