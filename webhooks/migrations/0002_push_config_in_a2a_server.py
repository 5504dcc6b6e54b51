"""A delivery's push config is the a2a_server app's model now; the column and its foreign key
stay as they are."""

import django.db.models.deletion
from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [
        ("a2a_server", "0001_initial"),
        ("webhooks", "0001_initial"),
    ]

    operations = [
        migrations.SeparateDatabaseAndState(
            database_operations=[],
            state_operations=[
                migrations.AlterField(
                    model_name="delivery",
                    name="push_config",
                    field=models.ForeignKey(
                        blank=True,
                        null=True,
                        on_delete=django.db.models.deletion.CASCADE,
                        related_name="+",
                        to="a2a_server.pushnotificationconfig",
                    ),
                ),
            ],
        ),
    ]
