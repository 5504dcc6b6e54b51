"""Webhooks and A2A push notifications: events fanned out to deliveries, sent by Celery."""

from django.apps import AppConfig


class WebhooksConfig(AppConfig):
    name = "webhooks"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self) -> None:
        from agents import events
        from webhooks import fanout

        events.committed.connect(fanout.nudge, dispatch_uid="webhooks.fanout.nudge")
