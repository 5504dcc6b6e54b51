"""An index for the waits' events in thread order: metrics.requests.replies (the answers, paired
with their INPUT_REQUIRED by a window over each thread) and metrics.collector's INPUT_TIMEOUT
count read only these rows, in the order the window wants, instead of the whole Event table."""

from django.db import migrations

NAME = "metrics_event_wait_idx"
TYPES = "('INPUT_REQUIRED', 'INPUT_PROVIDED', 'INPUT_TIMEOUT')"


class Migration(migrations.Migration):
    dependencies = [("metrics", "0001_indexes")]

    operations = [
        migrations.RunSQL(
            f"CREATE INDEX {NAME} ON agents_event (thread_id, id) WHERE type IN {TYPES}",
            f"DROP INDEX {NAME}",
        )
    ]
