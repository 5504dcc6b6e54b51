"""The revocation counter (approvals.models.RevocationCounter). Its triggers are installed after
every migrate (approvals.revocation_triggers says why)."""

from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [
        ("approvals", "0002_scopes_expiry_revocation_rate_counters"),
    ]

    operations = [
        migrations.CreateModel(
            name="RevocationCounter",
            fields=[
                (
                    "id",
                    models.BigAutoField(
                        auto_created=True, primary_key=True, serialize=False, verbose_name="ID"
                    ),
                ),
                ("count", models.BigIntegerField(default=0)),
            ],
        ),
    ]
