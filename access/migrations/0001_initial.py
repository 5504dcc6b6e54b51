"""Tokens, the revocation counter and the rate counters move here from the approvals app. Their
tables stay as they are (created by approvals' migrations, named approvals_*): this migration
only tells Django's state that the models are now this app's."""

import django.db.models.deletion
from django.conf import settings
from django.db import migrations, models


class Migration(migrations.Migration):
    initial = True

    dependencies = [
        migrations.swappable_dependency(settings.AUTH_USER_MODEL),
        ("approvals", "0003_revocation_counter"),
    ]

    operations = [
        migrations.SeparateDatabaseAndState(
            database_operations=[],
            state_operations=[
                migrations.CreateModel(
                    name="RateCounter",
                    fields=[
                        (
                            "key",
                            models.CharField(max_length=255, primary_key=True, serialize=False),
                        ),
                        ("hits", models.PositiveIntegerField(default=0)),
                        ("expires_at", models.FloatField()),
                    ],
                    options={
                        "db_table": "approvals_ratecounter",
                    },
                ),
                migrations.CreateModel(
                    name="RevocationCounter",
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
                        ("count", models.BigIntegerField(default=0)),
                    ],
                    options={
                        "db_table": "approvals_revocationcounter",
                    },
                ),
                migrations.CreateModel(
                    name="ApiToken",
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
                        ("name", models.CharField(blank=True, max_length=100)),
                        ("digest", models.CharField(editable=False, max_length=64, unique=True)),
                        (
                            "prefix",
                            models.CharField(
                                editable=False,
                                help_text="The token's first characters",
                                max_length=12,
                            ),
                        ),
                        ("scopes", models.JSONField(default=list)),
                        ("expires_at", models.DateTimeField(blank=True, null=True)),
                        ("revoked_at", models.DateTimeField(blank=True, null=True)),
                        ("created_at", models.DateTimeField(auto_now_add=True)),
                        ("last_used_at", models.DateTimeField(blank=True, null=True)),
                        (
                            "revoked_by",
                            models.ForeignKey(
                                blank=True,
                                null=True,
                                on_delete=django.db.models.deletion.SET_NULL,
                                related_name="+",
                                to=settings.AUTH_USER_MODEL,
                            ),
                        ),
                        (
                            "user",
                            models.ForeignKey(
                                on_delete=django.db.models.deletion.CASCADE,
                                related_name="api_tokens",
                                to=settings.AUTH_USER_MODEL,
                            ),
                        ),
                    ],
                    options={
                        "db_table": "approvals_apitoken",
                        "ordering": ["-created_at"],
                    },
                ),
            ],
        ),
    ]
