"""Web Push: requests on reviewers' devices, through the browsers' push services."""

from django.apps import AppConfig


class WebpushConfig(AppConfig):
    name = "webpush"
    verbose_name = "Web Push"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self) -> None:
        from agents import events
        from webpush import checks, fanout  # noqa: F401 - checks: registering is the import

        events.committed.connect(fanout.nudge, dispatch_uid="webpush.fanout.nudge")
