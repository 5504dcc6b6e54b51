"""Live text: what a model is writing in one frame, kept in a LiveText row for the pages."""

import logging
import time
from collections.abc import Callable
from typing import Any, cast
from uuid import UUID

from django.db import IntegrityError, connections, transaction
from django.db.models import Field
from django.utils import timezone

from agents import events
from agents.models import LiveText
from infra import transactions

log = logging.getLogger(__name__)

# approvals.hub reads the frames of a thread when it hears this; the row stays the truth.
LIVE_WAKE = "live.wake"
ACTIVITY_LIMIT = LiveText._meta.get_field("activity").max_length


class LiveWriter:
    """The live view of one model call or working frame (agents.runtime.llm.StreamListener).

    Text deltas are gathered and written at most every `min_interval` seconds; the text still
    waiting is written with the next tool(), activity() or text() after the interval. Every
    write is its own short statement in the worker's autocommit (a savepoint when a caller's
    transaction is open), bumps the row's `seq`, and wakes the sockets' hubs when there is a
    channel layer (approvals.hub tails the table when there is none). A write that fails is
    logged and skipped: the row is a view, never the record (that is the AGENT_MESSAGE event),
    so it must not stop the engine.
    """

    def __init__(
        self,
        thread_id: UUID,
        frame_id: int,
        min_interval: float = 0.1,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.thread_id = thread_id
        self.frame_id = frame_id
        self.min_interval = min_interval
        self.clock = clock
        self.written = ""
        self.doing = ""
        self.written_at: float | None = None
        self.stored = False  # a row exists (as far as this writer knows)
        self.shown: tuple[str, str] | None = None  # its text and activity, as last written

    def text(self, delta: str) -> None:
        if not delta:
            return
        self.written += delta
        if self.written_at is None or self.clock() - self.written_at >= self.min_interval:
            self._write()

    def tool(self, name: str) -> None:
        self.activity(f"calling {name}…")

    def restart(self) -> None:
        self.written = ""
        self._write()

    def activity(self, what: str, alone: bool = True) -> None:
        """`alone=False`: written in the caller's transaction (see close)."""
        self.doing = what[:ACTIVITY_LIMIT]
        if alone:
            self._write()
            return
        self.written = ""  # the caller's transaction saves the answer (message_saved's work)
        self.written_at = self.clock()
        self._store()
        self.stored, self.shown = True, (self.written, self.doing)
        self._wake_on_commit()

    def message_saved(self) -> None:
        self.written = ""
        self._write()

    def close(self, alone: bool = True) -> None:
        """Delete the frame's line. `alone=False`: in the caller's transaction, with no
        savepoint (two statements fewer) and the wake-up once it commits; a failure is the
        caller's, as any failed statement of that transaction would be."""
        self.written, self.doing, self.written_at = "", "", None
        if not alone:
            self._delete()
            self.stored = False
            self._wake_on_commit()
            return
        try:
            self._alone(self._delete)
            self.stored = False
            self._wake()
        except Exception:
            log.warning("live text of frame %s: delete failed", self.frame_id, exc_info=True)

    def _write(self) -> None:
        self.written_at = self.clock()
        if not self.stored and not self.written and not self.doing:
            return  # nothing to show and no row to clear
        if self.stored and self.shown == (self.written, self.doing):
            return  # the row shows it already
        try:
            self._alone(self._store)
            self.stored, self.shown = True, (self.written, self.doing)
            self._wake()
        except IntegrityError:
            pass  # the frame is gone (a cancelled run): there is no line to show
        except Exception:
            log.warning("live text of frame %s: write failed", self.frame_id, exc_info=True)

    def _alone(self, work: Callable[[], Any]) -> None:
        """Run `work` in autocommit, or in a savepoint when a caller's transaction is open, so
        that a failure leaves that transaction usable."""
        if transactions.in_transaction():
            with transaction.atomic():
                work()
        else:
            work()

    def _store(self) -> None:
        """One statement: the row made, or its text replaced and its seq bumped. (The ORM
        has no upsert that can bump a counter, and an update-then-insert was four statements
        and a commit of its own for a frame's first line.) Both databases read
        ON CONFLICT ... DO UPDATE (SQLite since 3.24)."""
        db = connections[LiveText.objects.db]
        meta = LiveText._meta

        def field(name: str) -> "Field[Any, Any]":
            return cast("Field[Any, Any]", meta.get_field(name))

        values = [
            field("frame").get_db_prep_save(self.frame_id, db),
            field("thread").get_db_prep_save(self.thread_id, db),
            self.written,
            self.doing,
            field("updated_at").get_db_prep_save(timezone.now(), db),
        ]
        q = db.ops.quote_name
        table = q(meta.db_table)
        frame, thread, seq = (q(field(name).column) for name in ("frame", "thread", "seq"))
        text, activity, updated = (q(field(n).column) for n in ("text", "activity", "updated_at"))
        with db.cursor() as cursor:
            cursor.execute(
                f"INSERT INTO {table} ({frame}, {thread}, {text}, {activity}, {seq}, {updated}) "
                f"VALUES (%s, %s, %s, %s, 1, %s) ON CONFLICT ({frame}) DO UPDATE SET "
                f"{seq} = {table}.{seq} + 1, {text} = excluded.{text}, "
                f"{activity} = excluded.{activity}, {updated} = excluded.{updated}",
                values,
            )

    def _delete(self) -> None:
        """One statement: the frame's line deleted. (Every step that ends or waits clears its
        line, written or not; the ORM's delete built its statement and collector each time, 3 %
        of a worker's CPU in the full cycle: bench/HISTORY.md, session 25.)"""
        db = connections[LiveText.objects.db]
        meta = LiveText._meta
        q = db.ops.quote_name
        frame = cast("Field[Any, Any]", meta.get_field("frame"))
        with db.cursor() as cursor:
            cursor.execute(
                f"DELETE FROM {q(meta.db_table)} WHERE {q(frame.column)} = %s",
                [frame.get_db_prep_save(self.frame_id, db)],
            )

    def _wake_on_commit(self) -> None:
        """Once the caller's transaction commits: with its events' wake-up when it has one."""
        if not events.live_with_wake(self.thread_id):
            transaction.on_commit(self._wake)

    def _wake(self) -> None:
        try:
            events.broadcast({"type": LIVE_WAKE, "thread": str(self.thread_id)})
        except Exception:
            log.warning("live text: the wake-up was not sent", exc_info=True)
