"""Webhooks and A2A push notifications: events fanned out to deliveries, sent by Celery."""

from django.apps import AppConfig


class WebhooksConfig(AppConfig):
    name = "webhooks"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self) -> None:
        from django.db.models.signals import post_delete, post_save, pre_delete

        from a2a_server.models import PushNotificationConfig
        from agents import events
        from webhooks import fanout, outbox
        from webhooks.models import Subscription

        events.committed.connect(fanout.nudge, dispatch_uid="webhooks.fanout.nudge")
        for model in (Subscription, PushNotificationConfig):
            for signal in (post_save, post_delete):
                signal.connect(
                    fanout.forget_receivers,
                    sender=model,
                    dispatch_uid=f"webhooks.fanout.forget_receivers.{model.__name__}.{signal}",
                )
            # A deletion waits for an attempt being recorded (outbox.hold_deliveries).
            pre_delete.connect(
                outbox.hold_deliveries,
                sender=model,
                dispatch_uid=f"webhooks.outbox.hold_deliveries.{model.__name__}",
            )
