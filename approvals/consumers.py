"""The events socket: subscribe, replay from the Event table, then stream (invariant 5).

A socket subscribes to its process's hub (approvals.hub) first, then replays from the table
after its cursor, then applies the hub's batches. A batch that starts beyond the socket's
cursor sends it back to the table, so nothing between is missed; ids it has already sent are
skipped. A consumer never writes an event, and it steps over a missing event id only once the
gap has settled (agents.cursor), so an event committed out of id order is still delivered,
in order. What it reads itself it sends only once the hub has cleared its credentials against
the revocation counter read after those events (access.clearance); once revoked, it sends
nothing more and closes with 4401.

A socket opened with `?thread=<uuid>` (the thread page's) also watches that thread's live text
once its replay is done: the hub sends it the frames' LiveText rows as they are, then their
changes, as LIVE_TEXT messages (the shape is in approvals.live). Those are not events: they
carry no id and leave the cursor alone. A socket that cannot keep up gets the newest message of
each frame, not every one.

Neither are claims and presence: a page says which cards it shows, and claims them, over the
same socket, and gets PRESENCE messages back (presence.session has the shapes; presence.board
reads the rows and fans them out).
"""

import asyncio
import contextlib
import logging
from typing import Any
from urllib.parse import parse_qs

from channels.db import database_sync_to_async
from channels.generic.websocket import AsyncJsonWebsocketConsumer

from access import scopes
from access.models import Scope
from access.revocation import Credential, revocations
from agents.cursor import GAP_WAIT
from approvals.http import parse_uuid
from approvals.hub import hub
from approvals.settled import BATCH, Batch, read_settled
from presence.session import MESSAGES as PRESENCE_MESSAGES
from presence.session import PresenceSession

log = logging.getLogger(__name__)

HEARTBEAT_INTERVAL = 20
INBOX_LIMIT = 100  # batches waiting for a slow socket; past it, it reads the table instead
# Close code when a message could not be sent: the client reconnects and replays from its
# cursor, instead of a socket that looks open while it no longer streams.
SEND_FAILED = 4500


class EventConsumer(AsyncJsonWebsocketConsumer):
    async def connect(self) -> None:
        user = self.scope.get("user")
        if user is None or not user.is_authenticated:
            await self.close(code=4401)
            return
        # A token streams every run only with the read scope (access.scopes).
        if not scopes.has(user, Scope.READ) or not await database_sync_to_async(user.has_perm)(
            "agents.view_thread"
        ):
            await self.close(code=4403)
            return
        session = self.scope.get("session")
        token = self.scope.get("token_digest")
        # What the hub checks again while the socket is open (access.revocation).
        self.credential = Credential(
            user_id=user.pk,
            session_key=None if token else getattr(session, "session_key", None),
            token_digest=token,
        )
        self.revoked = False
        query = parse_qs(self.scope.get("query_string", b"").decode())
        after = (query.get("after") or ["0"])[0]
        self.cursor = int(after) if after.isdigit() else 0
        watched = parse_uuid((query.get("thread") or [""])[0])
        # Live text waiting to be sent, newest per frame and kind: (frame id, done) -> message.
        self.live_out: dict[tuple[int, bool], str] = {}
        self.live_ready = asyncio.Event()
        self.lock = asyncio.Lock()
        self.inbox: asyncio.Queue[Batch | None] = asyncio.Queue()
        self.tasks: list[asyncio.Task] = []
        self.gap_check: asyncio.Task | None = None
        # A token claims only with the decide scope, as it would decide (access.scopes).
        self.presence = PresenceSession(user, self.send, may_claim=scopes.has(user, Scope.DECIDE))
        await self.accept()
        # Subscribe first, then replay: a batch read during the replay waits in the inbox.
        self.hub = hub()
        self.hub.subscribe(self)
        if await self.guarded(self.replay()):
            self.tasks += [
                asyncio.create_task(self.guarded(self.pump())),
                asyncio.create_task(self.guarded(self.heartbeat())),
                asyncio.create_task(self.guarded(self.presence.pump())),
            ]
            if watched is not None:
                self.tasks.append(asyncio.create_task(self.guarded(self.pump_live())))
                self.hub.watch(self, str(watched))

    async def disconnect(self, code: int) -> None:
        for task in getattr(self, "tasks", []):
            task.cancel()
        if hasattr(self, "hub"):
            await self.hub.unsubscribe(self)
        if hasattr(self, "presence"):
            await self.presence.leave()  # releases its claims: the others see it go

    async def revoke(self) -> None:
        """Called by the hub when the credentials the socket was opened with no longer hold."""
        if not self.revoked:
            self.revoked = True
            await self.close(code=4401)

    async def receive_json(self, content: Any, **kwargs: Any) -> None:
        if not isinstance(content, dict):
            return
        if content.get("type") == "ping":
            await self.send_json({"type": "pong", "cursor": self.cursor})
        elif content.get("type") in PRESENCE_MESSAGES and not self.revoked:
            answer = await self.presence.receive(content)
            if answer is not None:
                await self.send_json(answer)

    def deliver(self, batch: Batch) -> None:
        """Called by the hub for every batch it reads."""
        if self.revoked:
            return
        if self.inbox.qsize() >= INBOX_LIMIT:
            # A slow client: drop what waits; the next batch is beyond its cursor, so the
            # socket goes back to the table for everything it had not sent.
            while not self.inbox.empty():
                self.inbox.get_nowait()
        self.inbox.put_nowait(batch)

    def deliver_live(self, frame_id: int, done: bool, text: str) -> None:
        """Called by the hub for each LIVE_TEXT message of the watched thread. A newer message
        of the same frame and kind replaces one still waiting, and goes after the rest, so an
        end (`done`) and a new start of a frame keep their order."""
        if self.revoked:
            return
        self.live_out.pop((frame_id, done), None)
        self.live_out[(frame_id, done)] = text
        self.live_ready.set()

    async def pump_live(self) -> None:
        while True:
            await self.live_ready.wait()
            self.live_ready.clear()
            while self.live_out and not self.revoked:
                key = next(iter(self.live_out))
                await self.send(text_data=self.live_out.pop(key))

    async def guarded(self, work: Any) -> bool:
        """Run `work`; if sending fails (or anything else breaks the stream), close the socket
        with SEND_FAILED rather than leave it open and silent. False when it closed."""
        try:
            await work
        except asyncio.CancelledError:
            raise
        except Exception:
            log.warning("events socket: sending failed; closing it", exc_info=True)
            with contextlib.suppress(Exception):
                await self.close(code=SEND_FAILED)
            return False
        return True

    async def pump(self) -> None:
        while True:
            batch = await self.inbox.get()
            async with self.lock:
                if self.revoked:
                    return
                if batch is not None and self.cursor >= batch.prev:
                    for row in batch.rows:
                        if row.id > self.cursor:
                            await self.send(text_data=row.text)
                            self.cursor = row.id
                    continue
            await self.replay()

    async def replay(self) -> None:
        """Send what the table holds after the cursor, up to a gap that has not settled."""
        async with self.lock:
            while not self.revoked:
                rows, stopped_at_gap, revoked = await self.read(self.cursor)
                if rows and not await self.hub.admits(self, revoked):
                    return
                for row in rows:
                    await self.send(text_data=row.text)
                    self.cursor = row.id
                if stopped_at_gap:
                    # An earlier id may still commit: look again once it must have.
                    self.recheck_gap()
                    return
                if len(rows) < BATCH:
                    return

    @database_sync_to_async
    def read(self, after: int) -> Any:
        """The settled events after `after`, whether a gap stopped them, and the revocation
        counter read after them (when there are any)."""
        rows, stopped_at_gap = read_settled(after)
        return rows, stopped_at_gap, revocations() if rows else 0

    def recheck_gap(self) -> None:
        if self.gap_check is not None:
            return

        async def later() -> None:
            await asyncio.sleep(GAP_WAIT.total_seconds())
            self.gap_check = None
            self.inbox.put_nowait(None)  # the pump reads the table again

        self.gap_check = asyncio.create_task(later())
        self.tasks.append(self.gap_check)

    async def heartbeat(self) -> None:
        while True:
            await asyncio.sleep(HEARTBEAT_INTERVAL)
            await self.send_json({"type": "heartbeat", "cursor": self.cursor})
