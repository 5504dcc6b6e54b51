"""Indexes for the metrics' queries on the engine's tables (agents owns the tables; these are
added here so the engine's models stay as they are). Plain SQL that SQLite and PostgreSQL
both read."""

from django.db import migrations

INDEXES = [
    # metrics.requests.raised_between and open_during: suspensions raised in a window.
    ("metrics_suspension_raised_idx", "agents_suspension (created_at)"),
    # metrics.requests.open_during: suspensions decided in a window.
    (
        "metrics_suspension_decided_idx",
        "agents_suspension (decided_at) WHERE decided_at IS NOT NULL",
    ),
    # metrics.requests.waits: the waits for a message (INPUT_REQUIRED events), by time; only
    # those rows pay for it, not every event.
    ("metrics_event_input_idx", "agents_event (created_at) WHERE type = 'INPUT_REQUIRED'"),
]


class Migration(migrations.Migration):
    dependencies = [("agents", "0001_initial")]

    operations = [
        migrations.RunSQL(f"CREATE INDEX {name} ON {target}", f"DROP INDEX {name}")
        for name, target in INDEXES
    ]
