"""The demo's table moves here from the agents app. It stays as it is (created by agents'
migrations, named agents_demoaction): only Django's state changes."""

import django.db.models.deletion
from django.db import migrations, models


class Migration(migrations.Migration):
    initial = True

    dependencies = [
        ("agents", "0013_demo_actions_move_to_demo"),
    ]

    operations = [
        migrations.SeparateDatabaseAndState(
            database_operations=[],
            state_operations=[
                migrations.CreateModel(
                    name="DemoAction",
                    fields=[
                        (
                            "id",
                            models.BigAutoField(
                                auto_created=True,
                                primary_key=True,
                                serialize=False,
                                verbose_name="ID",
                            ),
                        ),
                        ("tool", models.CharField(max_length=100)),
                        (
                            "idempotency_key",
                            models.CharField(blank=True, max_length=200, null=True, unique=True),
                        ),
                        ("arguments", models.JSONField(default=dict)),
                        ("summary", models.TextField()),
                        ("created_at", models.DateTimeField(auto_now_add=True)),
                        (
                            "thread",
                            models.ForeignKey(
                                blank=True,
                                null=True,
                                on_delete=django.db.models.deletion.SET_NULL,
                                related_name="+",
                                to="agents.thread",
                            ),
                        ),
                    ],
                    options={
                        "db_table": "agents_demoaction",
                        "ordering": ["-id"],
                    },
                ),
            ],
        ),
    ]
