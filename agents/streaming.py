"""Live text: what a model is writing in one frame, kept in a LiveText row for the pages."""

import logging
import time
from collections.abc import Callable
from typing import Any

from django.db import IntegrityError, transaction
from django.db.models import F
from django.utils import timezone

from agents import events
from agents.models import LiveText

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
        thread_id: Any,
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

    def activity(self, what: str) -> None:
        self.doing = what[:ACTIVITY_LIMIT]
        self._write()

    def message_saved(self) -> None:
        self.written = ""
        self._write()

    def close(self) -> None:
        self.written, self.doing, self.written_at = "", "", None
        try:
            self._alone(LiveText.objects.filter(frame_id=self.frame_id).delete)
            self.stored = False
            self._wake()
        except Exception:
            log.warning("live text of frame %s: delete failed", self.frame_id, exc_info=True)

    def _write(self) -> None:
        self.written_at = self.clock()
        if not self.stored and not self.written and not self.doing:
            return  # nothing to show and no row to clear
        try:
            self._alone(self._store)
            self.stored = True
            self._wake()
        except Exception:
            log.warning("live text of frame %s: write failed", self.frame_id, exc_info=True)

    def _alone(self, work: Callable[[], Any]) -> None:
        """Run `work` in autocommit, or in a savepoint when a caller's transaction is open, so
        that a failure leaves that transaction usable."""
        if transaction.get_connection().in_atomic_block:
            with transaction.atomic():
                work()
        else:
            work()

    def _store(self) -> None:
        fields = {"text": self.written, "activity": self.doing}
        if self._update(fields):
            return
        try:
            with transaction.atomic():
                LiveText.objects.create(
                    frame_id=self.frame_id, thread_id=self.thread_id, seq=1, **fields
                )
        except IntegrityError:
            # Another writer of this frame made the row first (or the frame is gone, and
            # then this update changes nothing).
            self._update(fields)

    def _update(self, fields: dict[str, str]) -> int:
        return LiveText.objects.filter(frame_id=self.frame_id).update(
            seq=F("seq") + 1, updated_at=timezone.now(), **fields
        )

    def _wake(self) -> None:
        try:
            events.broadcast({"type": LIVE_WAKE, "thread": str(self.thread_id)})
        except Exception:
            log.warning("live text: the wake-up was not sent", exc_info=True)
