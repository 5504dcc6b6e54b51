"""The events' two functions on PostgreSQL, with statements whose plans are kept.

`agents_event_chain_heads` (migration 0007) locked the threads with `id = ANY(threads)` and
read the heads over `unnest(threads)`: PL/pgSQL planned both again at every call (a custom
plan each time: the generic one of `= ANY` on a small table is a sequential scan), about
0.3 ms of PostgreSQL's time a call where the reads themselves take 0.01; every state change
calls it. Now each thread is locked and read by an equality on its id, a plan made once per
connection. The statements stay apart, in the same order: the locks first (threads in id
order), then the reads, each with a snapshot of its own taken after the locks
(bench/HISTORY.md, issue 42, session 27).

`agents_event_register_writer` (migration 0008) looked the event sequence up by its table at
every transaction that writes events (`pg_get_serial_sequence` reads the catalog's
dependencies); the sequence is named once here, as this database has it.
"""

import importlib

from django.db import migrations

# agents.chain.THREADLESS_LOCK (migration 0007)
THREADLESS_LOCK = 0x45564348_41494E
# approvals.cursor.WRITER_LOCK_BASE (migration 0008)
WRITER_LOCK_BASE = 0x4557 << 40

CHAIN_HEADS = f"""
CREATE OR REPLACE FUNCTION agents_event_chain_heads(threads uuid[], threadless boolean)
RETURNS TABLE (chain_thread uuid, chain_head varchar) LANGUAGE plpgsql VOLATILE AS $$
DECLARE
    t uuid;
BEGIN
    IF cardinality(threads) > 1 THEN
        threads := ARRAY(SELECT DISTINCT u FROM unnest(threads) AS u ORDER BY u);
    END IF;
    FOREACH t IN ARRAY coalesce(threads, '{{}}') LOOP
        PERFORM 1 FROM agents_thread WHERE id = t FOR NO KEY UPDATE;
    END LOOP;
    IF threadless THEN
        PERFORM pg_advisory_xact_lock({THREADLESS_LOCK});
    END IF;
    FOREACH t IN ARRAY coalesce(threads, '{{}}') LOOP
        chain_thread := t;
        SELECT e.hash INTO chain_head FROM agents_event e
            WHERE e.thread_id = t AND e.hash <> '' ORDER BY e.id DESC LIMIT 1;
        RETURN NEXT;
    END LOOP;
    IF threadless THEN
        chain_thread := NULL;
        SELECT e.hash INTO chain_head FROM agents_event e
            WHERE e.thread_id IS NULL AND e.hash <> '' ORDER BY e.id DESC LIMIT 1;
        RETURN NEXT;
    END IF;
END
$$;
"""


def register_writer(sequence: str) -> str:
    """Migration 0008's trigger function, `sequence` (the event ids' sequence) written in."""
    return f"""
CREATE OR REPLACE FUNCTION agents_event_register_writer() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE
    me text := pg_current_xact_id()::text;
BEGIN
    IF current_setting('agents.event_writer', true) IS DISTINCT FROM me THEN
        PERFORM pg_advisory_xact_lock_shared({WRITER_LOCK_BASE} + coalesce(
            pg_sequence_last_value({sequence}), 0));
        PERFORM set_config('agents.event_writer', me, true);
    END IF;
    RETURN NULL;
END
$$;
"""


def forwards(apps, schema_editor) -> None:
    if schema_editor.connection.vendor != "postgresql":
        return
    with schema_editor.connection.cursor() as cursor:
        # Its name with its schema, as quoted text: a name (unlike an oid) survives a dump and
        # restore.
        cursor.execute("SELECT quote_literal(pg_get_serial_sequence('agents_event', 'id'))")
        (name,) = cursor.fetchone()
    schema_editor.execute(CHAIN_HEADS, params=None)
    schema_editor.execute(register_writer(f"{name}::regclass"), params=None)


def backwards(apps, schema_editor) -> None:
    if schema_editor.connection.vendor != "postgresql":
        return
    # Migration 0007's function, as it made it.
    earlier = importlib.import_module("agents.migrations.0007_event_append_only")
    schema_editor.execute(earlier.NO_CHAIN_HEADS, params=None)
    schema_editor.execute(earlier.CHAIN_HEADS, params=None)
    schema_editor.execute(
        register_writer("pg_get_serial_sequence('agents_event', 'id')::regclass"), params=None
    )


class Migration(migrations.Migration):
    dependencies = [
        ("agents", "0022_suspension_review_asked_idx"),
    ]

    operations = [migrations.RunPython(forwards, backwards)]
