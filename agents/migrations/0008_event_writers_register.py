"""Every transaction that inserts events registers as a writer of events, for the readers'
gap horizon (approvals.cursor): on PostgreSQL, a statement trigger that fires before an
INSERT on agents_event produces its first row (so before the statement takes an id from the
sequence) takes a shared advisory lock keyed by WRITER_LOCK_BASE plus the sequence's last
value, once per transaction (a transaction-local setting remembers it; a savepoint rolled
back forgets the setting and releases the lock together).
"""

from django.db import migrations

# approvals.cursor.WRITER_LOCK_BASE ("EW" shifted past 2**40 event ids)
WRITER_LOCK_BASE = 0x4557 << 40

REGISTER = f"""
CREATE FUNCTION agents_event_register_writer() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE
    me text := pg_current_xact_id()::text;
BEGIN
    IF current_setting('agents.event_writer', true) IS DISTINCT FROM me THEN
        PERFORM pg_advisory_xact_lock_shared({WRITER_LOCK_BASE} + coalesce(
            pg_sequence_last_value(pg_get_serial_sequence('agents_event', 'id')::regclass), 0));
        PERFORM set_config('agents.event_writer', me, true);
    END IF;
    RETURN NULL;
END
$$;
CREATE TRIGGER agents_event_register_writer BEFORE INSERT ON agents_event
    FOR EACH STATEMENT EXECUTE FUNCTION agents_event_register_writer();
"""

UNREGISTER = """
DROP TRIGGER agents_event_register_writer ON agents_event;
DROP FUNCTION agents_event_register_writer();
"""


def forwards(apps, schema_editor) -> None:
    if schema_editor.connection.vendor == "postgresql":
        schema_editor.execute(REGISTER, params=None)


def backwards(apps, schema_editor) -> None:
    if schema_editor.connection.vendor == "postgresql":
        schema_editor.execute(UNREGISTER, params=None)


class Migration(migrations.Migration):
    dependencies = [
        ("agents", "0007_event_append_only"),
    ]

    operations = [migrations.RunPython(forwards, backwards)]
