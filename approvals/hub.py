"""One reader of the Event table per server process, fanned out to the process's sockets.

Were every socket to query the Event table on every wake-up, a thousand open inboxes would
make a thousand queries per event. The hub reads each new event once per process (and event
loop), encodes it once, and hands the batch to every socket it serves; a socket that is
behind the batch (it has just connected with an old cursor, or it fell behind) reads the table
itself (approvals.consumers). The Event table stays the truth (invariant 5): the channel
layer, when there is one, only wakes the hub, and a slow poll covers a lost wake-up; with no
channel layer the hub tails the table.

Before it hands a batch to its sockets, the hub reads the revocation counter, after the events,
and lets only the sockets whose credentials still hold have it (access.clearance): no event
recorded after a revocation committed reaches a socket opened with that credential.

The hub applies the same rule as a socket to a missing id: it does not step over one until
the gap has settled (agents.cursor), so a batch never skips an event that is still being
committed: it reads through approvals.settled. It also reads the live text of the threads its
sockets watch (approvals.live).
"""

import asyncio
import logging
import weakref
from datetime import datetime
from typing import Any, Protocol

from channels.layers import get_channel_layer

from access.clearance import Clearances
from access.revocation import CHECK_INTERVAL, REVOKED, Credential, revocations
from agents.cursor import GAP_WAIT, page_cursor
from agents.events import EVENTS_GROUP
from agents.streaming import LIVE_WAKE
from approvals.live import LiveFrame, read_live
from approvals.settled import BATCH, Batch, Row, read_settled
from infra.aio import blocking, detached_task, follow_group, wait_event

log = logging.getLogger(__name__)

TAIL_INTERVAL = 0.1  # no channel layer: how often the table is read
SAFETY_POLL = 1.0  # with a channel layer: a lost wake-up delays an event at most this long
# Carried events past a missing id wait this long for the missing id's own wake-up before the
# table is read. Ids commit out of order under load (one transaction takes id 7, another 8,
# and 8 commits first), and 7's wake-up comes a few milliseconds later: reading the table at
# once found nothing past the gap yet, one wasted read per out-of-order commit
# (bench/README.md). A missing id that never comes (a rolled-back insert) costs this much
# delay before the read that settles it.
CARRY_GRACE = 0.05
# The last subscriber gone, the hub reads on this long before it stops: a process whose only
# subscribers come and go (an MCP call held for a person, an outside agent's long poll, with
# no reviewer's page open) would otherwise start it afresh for each (a channel joined, the
# table read), and the wake-up of the decision such a wait is for could come before the new
# channel hears it (bench/README.md, issue 30).
LINGER = 30.0


class Subscriber(Protocol):
    credential: Credential

    def deliver(self, batch: Batch) -> None: ...

    async def revoke(self) -> None: ...


class Watcher(Subscriber, Protocol):
    """A subscriber that also watches a thread's live text (EventHub.watch)."""

    def deliver_live(self, frame_id: int, done: bool, text: str) -> None: ...


class EventHub:
    def __init__(self) -> None:
        self.layer = get_channel_layer()
        self.cursor: int | None = None
        self.subscribers: set[Subscriber] = set()
        self.wake = asyncio.Event()
        self.tasks: list[asyncio.Task] = []
        self.reads = 0  # table reads, for the benchmarks and tests that count them
        # Events the wake-ups carried (agents.events.wake_message), not yet delivered: applied
        # without a read when they follow the cursor with no id missing (see _take_carried).
        self.carried: dict[int, Row] = {}
        # Whether the next pass must read the table whatever was carried: at the start, after
        # a wait that no wake-up ended (the safety poll, a gap's wait), after a wake-up that
        # carried no events (too big to carry, or sent by an older process).
        self.must_read = True
        # Live text: the sockets watching each thread, and each watched thread's rows as last
        # read (frame id: LiveFrame), so a socket that starts watching gets them at once.
        self.watchers: dict[str, set[Watcher]] = {}
        self.live: dict[str, dict[int, LiveFrame]] = {}
        self.live_wake = asyncio.Event()
        self.live_reads = 0
        self.clearances = Clearances()
        self.stopping: asyncio.Task[None] | None = None  # the stop LINGER after the last left

    def subscribe(self, subscriber: Subscriber) -> None:
        self.subscribers.add(subscriber)
        if self.stopping is not None:
            self.stopping.cancel()
            self.stopping = None
        if not self.tasks:
            self.tasks = [
                detached_task(self._run()),
                detached_task(self._run_live()),
                detached_task(self._watch_credentials()),
            ]
            if self.layer is not None:
                self.tasks.append(detached_task(self._listen()))

    def watch(self, watcher: Watcher, thread: str) -> None:
        """Send `watcher` the live text of `thread` (a subscriber already): the rows as they
        are now, then every change."""
        watching = self.watchers.setdefault(thread, set())
        watching.add(watcher)
        if len(watching) == 1:
            self.live_wake.set()  # read the thread's rows now; they all go to the watchers
            return
        for frame in list(self.live.get(thread, {}).values()):
            watcher.deliver_live(frame.frame_id, False, frame.text)

    async def admits(self, subscriber: Subscriber, revocations: int) -> bool:
        """May `subscriber` be sent events it read itself (a replay, an A2A stream's read)?
        `revocations`: the counter, read after those events (access.clearance)."""
        return bool(await self.clearances.admit(revocations, [subscriber]))

    async def unsubscribe(self, subscriber: Subscriber) -> None:
        self.subscribers.discard(subscriber)
        self.clearances.forget(subscriber)
        for thread, watching in list(self.watchers.items()):
            watching.discard(subscriber)
            if not watching:
                del self.watchers[thread]
                self.live.pop(thread, None)
        if self.subscribers or not self.tasks or self.stopping is not None:
            return
        # The last subscriber left: stop reading after LINGER, unless another comes meanwhile.
        # A later one starts the hub afresh.
        self.stopping = detached_task(self._stop_later())

    async def _stop_later(self) -> None:
        await asyncio.sleep(LINGER)
        self.stopping = None
        if self.subscribers:
            return
        tasks, self.tasks, self.cursor = self.tasks, [], None
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)

    async def _run(self) -> None:
        if self.cursor is None:
            # Start a little behind the newest event, where every id has committed; the
            # sockets ignore what they already have.
            self.cursor = await blocking(page_cursor)()
        self.must_read = True
        while True:
            self.wake.clear()
            stopped_at_gap = await self._publish_new()
            if self.layer is None:
                interval = TAIL_INTERVAL
            elif stopped_at_gap:
                interval = GAP_WAIT.total_seconds() / 4
            else:
                interval = SAFETY_POLL
            await wait_event(self.wake, interval)
            if not self.wake.is_set():
                self.must_read = True

    def _take_carried(self) -> tuple[Batch | None, bool]:
        """The carried events that follow the cursor without a gap, as a batch (the cursor
        moves past them), and whether carried events wait past a missing id (kept; the table
        read's gap rules decide when one may be passed, see _publish_new)."""
        if not self.carried or self.cursor is None:
            return None, False
        rows = []
        while (row := self.carried.pop(self.cursor + 1 + len(rows), None)) is not None:
            rows.append(row)
        batch = None
        if rows:
            batch = Batch(self.cursor, rows)
            self.cursor = rows[-1].id
        cursor = self.cursor
        self.carried = {pk: row for pk, row in self.carried.items() if pk > cursor}
        return batch, bool(self.carried)

    async def _deliver_batch(self, batch: Batch | None, revoked: int | None = None) -> None:
        """Hand `batch` to the subscribers whose credentials still hold. `revoked`: the
        revocation counter as read after the batch's events; read now when not given (the
        events came with a wake-up, so they have committed already)."""
        if batch is None or not self.subscribers:
            return
        if revoked is None:
            revoked = await blocking(revocations)()
        for subscriber in await self.clearances.admit(revoked, list(self.subscribers)):
            subscriber.deliver(batch)

    async def _publish_new(self) -> bool:
        """Deliver what is new: from the carried events when they continue the cursor, else
        from the table. Returns whether the table read stopped at a gap."""
        batch, waiting = self._take_carried()
        await self._deliver_batch(batch)
        if waiting and self.layer is not None:
            # Past a missing id: give its wake-up CARRY_GRACE to come (see there).
            loop = asyncio.get_running_loop()
            until = loop.time() + CARRY_GRACE
            while waiting and (left := until - loop.time()) > 0:
                self.wake.clear()
                await wait_event(self.wake, left)
                batch, waiting = self._take_carried()
                await self._deliver_batch(batch)
        if not waiting and not self.must_read:
            # Every carried event is delivered (now or by an earlier read): nothing to read.
            return False
        self.carried.clear()
        self.must_read = False
        while True:
            rows, stopped_at_gap, revoked = await self._read(self.cursor)
            if rows:
                batch = Batch(self.cursor, rows)
                self.cursor = rows[-1].id
                await self._deliver_batch(batch, revoked)
            if stopped_at_gap or len(rows) < BATCH:
                # Rows past the gap are committed, and their wake-ups spent: read again.
                self.must_read = stopped_at_gap
                return stopped_at_gap

    @blocking
    def _read(self, after: int) -> tuple[list[Row], bool, int]:
        """The settled events after `after`, whether a gap stopped them, and the revocation
        counter read after them (when there are any)."""
        self.reads += 1
        rows, stopped_at_gap = read_settled(after)
        return rows, stopped_at_gap, revocations() if rows else 0

    async def _run_live(self) -> None:
        while True:
            self.live_wake.clear()
            interval = None  # nobody watches: wait for a watcher
            if self.watchers:
                try:
                    await self._publish_live()
                except Exception:
                    # The database is away: the next read tells what changed meanwhile.
                    log.warning("events hub: reading live text failed", exc_info=True)
                interval = TAIL_INTERVAL if self.layer is None else SAFETY_POLL
            await wait_event(self.live_wake, interval)

    async def _publish_live(self) -> None:
        threads = list(self.watchers)
        known = {
            frame.frame_id: (frame.seq, frame.updated_at)
            for thread in threads
            for frame in self.live.get(thread, {}).values()
        }
        present, changed, revoked = await self._read_live(threads, known)
        if changed:
            # Live text is the agents' words as much as events are: the same guarantee.
            watching = {w for thread in threads for w in self.watchers.get(thread, ())}
            await self.clearances.admit(revoked, watching)
        for frame in changed:
            if frame.thread not in self.watchers:
                continue  # nobody watches it any more
            rows = self.live.setdefault(frame.thread, {})
            before = rows.get(frame.frame_id)
            if before is not None and frame.seq <= before.seq:
                # The row was deleted and made again between two reads: end the old one.
                self._deliver(frame.thread, frame.frame_id, True, before.done())
            rows[frame.frame_id] = frame
            self._deliver(frame.thread, frame.frame_id, False, frame.text)
        for thread in threads:
            rows = self.live.get(thread, {})
            for frame_id in [f for f in rows if f not in present]:
                self._deliver(thread, frame_id, True, rows.pop(frame_id).done())

    def _deliver(self, thread: str, frame_id: int, done: bool, text: str) -> None:
        for watcher in list(self.watchers.get(thread, ())):
            if watcher not in self.clearances.revoked:
                watcher.deliver_live(frame_id, done, text)

    @blocking
    def _read_live(self, threads: list[str], known: dict[int, tuple[int, Any]]) -> Any:
        """read_live, and the revocation counter read after it (when a row changed)."""
        self.live_reads += 1
        present, changed = read_live(threads, known)
        return present, changed, revocations() if changed else 0

    async def _watch_credentials(self) -> None:
        """Every CHECK_INTERVAL, close the sockets whose credentials no longer hold, though
        no event comes to be sent."""
        while True:
            await asyncio.sleep(CHECK_INTERVAL)
            try:
                await self._check(list(self.subscribers))
            except Exception:
                # The database is away: the sockets stay until the next check can tell.
                log.warning("events hub: credentials check failed", exc_info=True)

    async def _check(self, subscribers: list[Subscriber]) -> None:
        if not subscribers:
            return
        # The counter first: the check that follows reads state at least as new as it.
        revoked = await blocking(revocations)()
        await self.clearances.admit(revoked, subscribers, recheck=True)

    async def _revoked(self, message: dict[str, Any]) -> None:
        """A revocation announced by access.revocation: this user's sockets, checked now."""
        mine = [s for s in self.subscribers if s.credential.user_id == message.get("user")]
        session = message.get("session")
        for subscriber in mine:
            if session and subscriber.credential.session_key == session:
                # Logged out: the session is about to be deleted.
                await self.clearances.revoke(subscriber)
        try:
            await self._check([s for s in mine if s in self.subscribers])
        except Exception:
            log.warning("events hub: credentials check failed", exc_info=True)

    def _carry(self, rows: Any) -> None:
        """Keep the events a wake-up carried ([id, socket message, created_at], ...)."""
        if not isinstance(rows, list) or len(self.carried) > BATCH:
            self.must_read = True  # none, or too many waiting already: the table covers them
            return
        for pk, text, created_at in rows:
            if self.cursor is None or pk > self.cursor:
                self.carried[pk] = Row(pk, text, datetime.fromisoformat(created_at))

    async def _listen(self) -> None:
        """Wake the readers on each wake-up the channel layer brings."""
        await follow_group(self.layer, EVENTS_GROUP, self._heard, SAFETY_POLL, "events hub")

    async def _heard(self, message: dict[str, Any]) -> None:
        kind = message.get("type")
        if kind == REVOKED:
            await self._revoked(message)
        elif kind == LIVE_WAKE:
            if message.get("thread") in self.watchers:
                self.live_wake.set()
        else:
            # An events wake-up may say whose live lines changed in its transaction too.
            if any(thread in self.watchers for thread in message.get("live") or ()):
                self.live_wake.set()
            self._carry(message.get("rows"))
            self.wake.set()


_hubs: "weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, EventHub]" = (
    weakref.WeakKeyDictionary()
)


def hub() -> EventHub:
    """The hub of the running event loop (daphne runs one per process)."""
    loop = asyncio.get_running_loop()
    found = _hubs.get(loop)
    if found is None:
        found = _hubs[loop] = EventHub()
    return found
