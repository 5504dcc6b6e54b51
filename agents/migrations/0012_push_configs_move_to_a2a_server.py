"""The push configs are the a2a_server app's now (a2a_server/migrations/0001_initial.py): they
leave this app's state; their table stays."""

from django.db import migrations


class Migration(migrations.Migration):
    dependencies = [
        ("agents", "0011_thread_suspended_resumed"),
        ("webhooks", "0002_push_config_in_a2a_server"),
    ]

    operations = [
        migrations.SeparateDatabaseAndState(
            database_operations=[],
            state_operations=[
                migrations.DeleteModel(
                    name="PushNotificationConfig",
                ),
            ],
        ),
    ]
