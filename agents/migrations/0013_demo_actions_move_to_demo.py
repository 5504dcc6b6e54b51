"""The demo's table is the demo app's now (demo/migrations/0001_initial.py): it leaves this
app's state; the table stays."""

from django.db import migrations


class Migration(migrations.Migration):
    dependencies = [
        ("agents", "0012_push_configs_move_to_a2a_server"),
    ]

    operations = [
        migrations.SeparateDatabaseAndState(
            database_operations=[],
            state_operations=[
                migrations.DeleteModel(
                    name="DemoAction",
                ),
            ],
        ),
    ]
