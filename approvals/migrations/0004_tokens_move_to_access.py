"""The tokens and counters are the access app's now (access/migrations/0001_initial.py): they
leave this app's state; their tables stay."""

from django.db import migrations


class Migration(migrations.Migration):
    dependencies = [
        ("approvals", "0003_revocation_counter"),
        ("access", "0001_initial"),
    ]

    operations = [
        migrations.SeparateDatabaseAndState(
            database_operations=[],
            state_operations=[
                migrations.RemoveField(
                    model_name="apitoken",
                    name="revoked_by",
                ),
                migrations.RemoveField(
                    model_name="apitoken",
                    name="user",
                ),
                migrations.DeleteModel(
                    name="RateCounter",
                ),
                migrations.DeleteModel(
                    name="RevocationCounter",
                ),
                migrations.DeleteModel(
                    name="ApiToken",
                ),
            ],
        ),
    ]
