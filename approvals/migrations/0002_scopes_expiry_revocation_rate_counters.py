"""Scoped, expiring, revocable tokens; the rate limits' counters for setups without Redis."""

from typing import Any

import django.db.models.deletion
from django.conf import settings
from django.db import migrations, models

# The scopes every token had before there were scopes: it could do whatever its user could.
EVERY_SCOPE = ["admin", "decide", "read", "runs"]


def every_scope(apps: Any, schema_editor: Any) -> None:
    """Tokens made before scopes keep working as they did."""
    apps.get_model("approvals", "ApiToken").objects.update(scopes=EVERY_SCOPE)


class Migration(migrations.Migration):
    dependencies = [
        ("approvals", "0001_initial"),
        migrations.swappable_dependency(settings.AUTH_USER_MODEL),
    ]

    operations = [
        migrations.CreateModel(
            name="RateCounter",
            fields=[
                ("key", models.CharField(max_length=255, primary_key=True, serialize=False)),
                ("hits", models.PositiveIntegerField(default=0)),
                ("expires_at", models.FloatField()),
            ],
        ),
        migrations.AddField(
            model_name="apitoken",
            name="expires_at",
            field=models.DateTimeField(blank=True, null=True),
        ),
        migrations.AddField(
            model_name="apitoken",
            name="revoked_at",
            field=models.DateTimeField(blank=True, null=True),
        ),
        migrations.AddField(
            model_name="apitoken",
            name="revoked_by",
            field=models.ForeignKey(
                blank=True,
                null=True,
                on_delete=django.db.models.deletion.SET_NULL,
                related_name="+",
                to=settings.AUTH_USER_MODEL,
            ),
        ),
        migrations.AddField(
            model_name="apitoken",
            name="scopes",
            field=models.JSONField(default=list),
        ),
        migrations.RunPython(every_scope, migrations.RunPython.noop),
    ]
