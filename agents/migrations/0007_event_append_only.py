"""The Event table is append-only: on PostgreSQL a trigger refuses UPDATE and DELETE, and a
function locks a chain and reads its head for agents.chain.seal.

TRUNCATE is a statement of its own, which row triggers do not see: the test suite's flush
still empties the table. Threads and suspensions protect their events (PROTECT), and the
actor's reference has no constraint (migration 0006), so nothing the ORM does cascades into
the table.
"""

import django.db.models.deletion
import django.utils.timezone
from django.db import migrations, models

# agents.chain.THREADLESS_LOCK
THREADLESS_LOCK = 0x45564348_41494E

APPEND_ONLY = """
CREATE FUNCTION agents_event_refuse_change() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    RAISE EXCEPTION 'agents_event is append-only: % of event % refused', TG_OP, OLD.id
        USING ERRCODE = 'restrict_violation',
              HINT = 'The audit trail is never changed (agents.chain; verify_audit).';
END
$$;
CREATE TRIGGER agents_event_append_only BEFORE UPDATE OR DELETE ON agents_event
    FOR EACH ROW EXECUTE FUNCTION agents_event_refuse_change();
"""

NOT_APPEND_ONLY = """
DROP TRIGGER agents_event_append_only ON agents_event;
DROP FUNCTION agents_event_refuse_change();
"""

# The threads' rows are locked in id order (as expire_overdue does), then the heads are read
# by a second statement: in a VOLATILE function each statement takes a new snapshot, so it
# sees the events of the transaction that held the lock before. (A single statement would
# read them with the snapshot it took before waiting for the lock.)
CHAIN_HEADS = f"""
CREATE FUNCTION agents_event_chain_heads(threads uuid[], threadless boolean)
RETURNS TABLE (chain_thread uuid, chain_head varchar) LANGUAGE plpgsql VOLATILE AS $$
BEGIN
    PERFORM 1 FROM agents_thread t WHERE t.id = ANY(threads) ORDER BY t.id
        FOR NO KEY UPDATE;
    IF threadless THEN
        PERFORM pg_advisory_xact_lock({THREADLESS_LOCK});
    END IF;
    RETURN QUERY
        SELECT u.id, (
            SELECT e.hash FROM agents_event e
            WHERE e.thread_id = u.id AND e.hash <> '' ORDER BY e.id DESC LIMIT 1
        )
        FROM unnest(threads) AS u(id)
        UNION ALL
        SELECT NULL::uuid, (
            SELECT e.hash FROM agents_event e
            WHERE e.thread_id IS NULL AND e.hash <> '' ORDER BY e.id DESC LIMIT 1
        )
        WHERE threadless;
END
$$;
"""

NO_CHAIN_HEADS = "DROP FUNCTION agents_event_chain_heads(uuid[], boolean);"


def forwards(apps, schema_editor) -> None:
    if schema_editor.connection.vendor == "postgresql":
        schema_editor.execute(APPEND_ONLY, params=None)
        schema_editor.execute(CHAIN_HEADS, params=None)


def backwards(apps, schema_editor) -> None:
    if schema_editor.connection.vendor == "postgresql":
        schema_editor.execute(NO_CHAIN_HEADS, params=None)
        schema_editor.execute(NOT_APPEND_ONLY, params=None)


class Migration(migrations.Migration):
    dependencies = [
        ("agents", "0006_trust_policy_versions_chain"),
    ]

    operations = [
        migrations.AlterField(
            model_name="event",
            name="created_at",
            field=models.DateTimeField(default=django.utils.timezone.now, editable=False),
        ),
        migrations.AlterField(
            model_name="event",
            name="suspension",
            field=models.ForeignKey(
                blank=True,
                null=True,
                on_delete=django.db.models.deletion.PROTECT,
                related_name="events",
                to="agents.suspension",
            ),
        ),
        migrations.AlterField(
            model_name="event",
            name="thread",
            field=models.ForeignKey(
                blank=True,
                null=True,
                on_delete=django.db.models.deletion.PROTECT,
                related_name="events",
                to="agents.thread",
            ),
        ),
        migrations.RunPython(forwards, backwards),
    ]
