"""The audit event of an immediate call (MCP_TOOL_CALLED), written just after its answer.

Writing it before answering held every relayed call for a transaction of its own (a chained
insert and its commit: a third of the gateway's time on such a call, bench/README.md, issue
30). The answer does not depend on it, so it is queued here and written by one task per event
loop, which waits GATHER_SECONDS for the calls ending about then and writes them all in one
transaction: an event is in the table some 50 milliseconds after its call's answer, and the
calls of a busy moment share one insert and one commit. Calls are written in the order they
ended.

A write that fails (the database away) is tried again, WRITE_ATTEMPTS times in all, with a
growing pause; the events still unwritten then are logged at ERROR with their count, so an
operator sees the gap. A process that dies between a call's answer and its event's write
loses that event, as it would have between the upstream's answer and the write before.
"""

import asyncio
import logging
import weakref
from dataclasses import dataclass, field

from agents.models import Event
from infra.aio import blocking, detached_task
from mcp_gateway import actions

log = logging.getLogger(__name__)

WRITE_ATTEMPTS = 5
FIRST_PAUSE = 0.2  # seconds before the second attempt, doubled for each after it
BATCH = 500  # the most events one transaction writes
# How long the writer waits, once a call is queued, for others to share its transaction: the
# write's own cost (a transaction, the chain's seal) shared by the calls of that moment.
GATHER_SECONDS = 0.05


@dataclass
class _Writer:
    queued: list[Event] = field(default_factory=list)
    task: "asyncio.Task[None] | None" = None

    async def drain(self) -> None:
        try:
            # A moment for the calls ending about now to join the first write.
            await asyncio.sleep(GATHER_SECONDS)
            while self.queued:
                batch = self.queued[:BATCH]
                del self.queued[:BATCH]
                await self._write(batch)
        finally:
            self.task = None

    async def _write(self, batch: list[Event]) -> None:
        pause = FIRST_PAUSE
        for attempt in range(1, WRITE_ATTEMPTS + 1):
            try:
                await blocking(actions.record_calls)(batch)
                return
            except Exception:
                if attempt == WRITE_ATTEMPTS:
                    log.exception("%d MCP call events could not be written", len(batch))
                    return
                log.warning("MCP call events: write %d failed, trying again", attempt)
                await asyncio.sleep(pause)
                pause *= 2


_writers: "weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, _Writer]" = (
    weakref.WeakKeyDictionary()
)


def _writer() -> _Writer:
    loop = asyncio.get_running_loop()
    writer = _writers.get(loop)
    if writer is None:
        writer = _writers[loop] = _Writer()
    return writer


def later(event: Event) -> None:
    """Queue a call's MCP_TOOL_CALLED event (actions.called), to be written by this loop's
    writer."""
    writer = _writer()
    writer.queued.append(event)
    if writer.task is None:
        writer.task = detached_task(writer.drain())
