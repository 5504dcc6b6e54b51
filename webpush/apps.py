"""Web Push: requests on reviewers' devices, through the browsers' push services."""

from django.apps import AppConfig


class WebpushConfig(AppConfig):
    name = "webpush"
    verbose_name = "Web Push"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self) -> None:
        from django.db.models.signals import post_delete, post_save

        from agents import events
        from webpush import checks, fanout  # noqa: F401 - checks: registering is the import
        from webpush.models import Device

        events.committed.connect(fanout.nudge, dispatch_uid="webpush.fanout.nudge")
        for signal in (post_save, post_delete):
            signal.connect(
                fanout.devices_known.forget,
                sender=Device,
                dispatch_uid=f"webpush.fanout.devices_known.{signal}",
            )
