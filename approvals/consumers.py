"""The events socket: subscribe, replay from the Event table, then stream (invariant 5).

A socket subscribes to its process's hub (approvals.hub) first, then replays from the table
after its cursor, then applies the hub's batches. A batch that starts beyond the socket's
cursor sends it back to the table, so nothing between is missed; ids it has already sent are
skipped. A consumer never writes state, and it steps over a missing event id only once the gap
has settled (approvals.cursor), so an event committed out of id order is still delivered, in
order.
"""

import asyncio
import contextlib
from typing import Any
from urllib.parse import parse_qs

from channels.db import database_sync_to_async
from channels.generic.websocket import AsyncJsonWebsocketConsumer

from approvals.cursor import GAP_WAIT
from approvals.hub import BATCH, Batch, hub, read_settled

HEARTBEAT_INTERVAL = 20
INBOX_LIMIT = 100  # batches waiting for a slow socket; past it, it reads the table instead


class EventConsumer(AsyncJsonWebsocketConsumer):
    async def connect(self) -> None:
        user = self.scope.get("user")
        if user is None or not user.is_authenticated:
            await self.close(code=4401)
            return
        if not await database_sync_to_async(user.has_perm)("agents.view_thread"):
            await self.close(code=4403)
            return
        query = parse_qs(self.scope.get("query_string", b"").decode())
        after = (query.get("after") or ["0"])[0]
        self.cursor = int(after) if after.isdigit() else 0
        self.lock = asyncio.Lock()
        self.inbox: asyncio.Queue[Batch | None] = asyncio.Queue()
        self.tasks: list[asyncio.Task] = []
        self.gap_check: asyncio.Task | None = None
        await self.accept()
        # Subscribe first, then replay: a batch read during the replay waits in the inbox.
        self.hub = hub()
        self.hub.subscribe(self)
        await self.replay()
        self.tasks += [asyncio.create_task(self.pump()), asyncio.create_task(self.heartbeat())]

    async def disconnect(self, code: int) -> None:
        for task in getattr(self, "tasks", []):
            task.cancel()
        if hasattr(self, "hub"):
            await self.hub.unsubscribe(self)

    async def receive_json(self, content: Any, **kwargs: Any) -> None:
        if isinstance(content, dict) and content.get("type") == "ping":
            await self.send_json({"type": "pong", "cursor": self.cursor})

    def deliver(self, batch: Batch) -> None:
        """Called by the hub for every batch it reads."""
        if self.inbox.qsize() >= INBOX_LIMIT:
            # A slow client: drop what waits; the next batch is beyond its cursor, so the
            # socket goes back to the table for everything it had not sent.
            while not self.inbox.empty():
                self.inbox.get_nowait()
        self.inbox.put_nowait(batch)

    async def pump(self) -> None:
        while True:
            batch = await self.inbox.get()
            async with self.lock:
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
            while True:
                rows, stopped_at_gap = await self.read(self.cursor)
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
        return read_settled(after)

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
        with contextlib.suppress(asyncio.CancelledError):
            while True:
                await asyncio.sleep(HEARTBEAT_INTERVAL)
                await self.send_json({"type": "heartbeat", "cursor": self.cursor})
