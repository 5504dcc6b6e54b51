"""The A2A server's one table: where a client wants a task's updates pushed."""

import uuid

from django.conf import settings
from django.db import models

from agents.models import Thread


class PushNotificationConfig(models.Model):
    """Where an A2A client wants a task's updates pushed (A2A's TaskPushNotificationConfig).
    Stored and checked by a2a_server.push; pushed by webhooks (a2a_server.notifications says
    what)."""

    id = models.UUIDField(primary_key=True, default=uuid.uuid4, editable=False)
    thread = models.ForeignKey(Thread, models.CASCADE, related_name="push_configs")
    config_id = models.CharField(max_length=200)
    url = models.URLField(max_length=2000)
    token = models.CharField(max_length=500, blank=True)
    authentication = models.JSONField(null=True, blank=True)
    created_by = models.ForeignKey(settings.AUTH_USER_MODEL, models.SET_NULL, null=True, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        db_table = "agents_pushnotificationconfig"  # created by the agents app, where it began
        ordering = ["created_at", "id"]
        constraints = [
            models.UniqueConstraint(fields=["thread", "config_id"], name="push_config_per_task")
        ]
