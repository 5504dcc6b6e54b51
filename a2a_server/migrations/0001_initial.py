"""The push configs move here from the agents app. Their table stays as it is (created by
agents' migrations, named agents_pushnotificationconfig): only Django's state changes."""

import uuid

import django.db.models.deletion
from django.conf import settings
from django.db import migrations, models


class Migration(migrations.Migration):
    initial = True

    dependencies = [
        ("agents", "0011_thread_suspended_resumed"),
        migrations.swappable_dependency(settings.AUTH_USER_MODEL),
    ]

    operations = [
        migrations.SeparateDatabaseAndState(
            database_operations=[],
            state_operations=[
                migrations.CreateModel(
                    name="PushNotificationConfig",
                    fields=[
                        (
                            "id",
                            models.UUIDField(
                                default=uuid.uuid4,
                                editable=False,
                                primary_key=True,
                                serialize=False,
                            ),
                        ),
                        ("config_id", models.CharField(max_length=200)),
                        ("url", models.URLField(max_length=2000)),
                        ("token", models.CharField(blank=True, max_length=500)),
                        ("authentication", models.JSONField(blank=True, null=True)),
                        ("created_at", models.DateTimeField(auto_now_add=True)),
                        (
                            "created_by",
                            models.ForeignKey(
                                blank=True,
                                null=True,
                                on_delete=django.db.models.deletion.SET_NULL,
                                to=settings.AUTH_USER_MODEL,
                            ),
                        ),
                        (
                            "thread",
                            models.ForeignKey(
                                on_delete=django.db.models.deletion.CASCADE,
                                related_name="push_configs",
                                to="agents.thread",
                            ),
                        ),
                    ],
                    options={
                        "db_table": "agents_pushnotificationconfig",
                        "ordering": ["created_at", "id"],
                        "constraints": [
                            models.UniqueConstraint(
                                fields=("thread", "config_id"), name="push_config_per_task"
                            )
                        ],
                    },
                ),
            ],
        ),
    ]
