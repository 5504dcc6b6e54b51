"""The events socket: subscribe, replay from the Event table, then stream (invariant 5).

The channel layer is only a wake-up; with none configured the consumer tails the table.
A consumer never writes state. It steps over a missing event id only once the gap has settled
(approvals.cursor), so an event committed out of id order is still delivered, in order.
"""

import asyncio
import contextlib
from datetime import datetime
from typing import Any
from urllib.parse import parse_qs

from channels.db import database_sync_to_async
from channels.generic.websocket import AsyncJsonWebsocketConsumer

from agents.events import EVENTS_GROUP
from agents.models import Event
from approvals.cursor import GAP_WAIT, gap_settled

BATCH = 500
TAIL_INTERVAL = 0.1
HEARTBEAT_INTERVAL = 20


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
        self.tasks: list[asyncio.Task] = []
        self.gap_check: asyncio.Task | None = None
        await self.accept()
        # Subscribe first, then replay: a wake-up during the replay is not lost.
        if self.channel_layer is not None:
            await self.channel_layer.group_add(EVENTS_GROUP, self.channel_name)
        await self.replay()
        if self.channel_layer is None:
            self.tasks.append(asyncio.create_task(self.tail()))
        self.tasks.append(asyncio.create_task(self.heartbeat()))

    async def disconnect(self, code: int) -> None:
        for task in getattr(self, "tasks", []):
            task.cancel()
        if self.channel_layer is not None:
            await self.channel_layer.group_discard(EVENTS_GROUP, self.channel_name)

    async def receive_json(self, content: Any, **kwargs: Any) -> None:
        if isinstance(content, dict) and content.get("type") == "ping":
            await self.send_json({"type": "pong", "cursor": self.cursor})

    async def events_wake(self, message: dict[str, Any]) -> None:
        await self.replay()

    async def replay(self) -> None:
        async with self.lock:
            while True:
                rows = await self.fetch(self.cursor)
                for row, created_at in rows:
                    if row["id"] != self.cursor + 1 and not await self.settled(created_at):
                        # An earlier id may still commit: wait for it, then go on from here.
                        self.recheck_gap()
                        return
                    await self.send_json(row)
                    self.cursor = row["id"]
                if len(rows) < BATCH:
                    return

    def recheck_gap(self) -> None:
        """With a channel layer nothing else would call replay again until the next event."""
        if self.channel_layer is None or self.gap_check is not None:
            return

        async def later() -> None:
            await asyncio.sleep(GAP_WAIT.total_seconds())
            self.gap_check = None
            await self.replay()

        self.gap_check = asyncio.create_task(later())
        self.tasks.append(self.gap_check)

    @database_sync_to_async
    def settled(self, created_at: datetime) -> bool:
        return gap_settled(created_at)

    @database_sync_to_async
    def fetch(self, after: int) -> list[tuple[dict[str, Any], datetime]]:
        rows = Event.objects.filter(id__gt=after).select_related("actor").order_by("id")[:BATCH]
        return [
            ({**e.as_message(), "actor": e.actor.username if e.actor else None}, e.created_at)
            for e in rows
        ]

    async def tail(self) -> None:
        while True:
            await asyncio.sleep(TAIL_INTERVAL)
            await self.replay()

    async def heartbeat(self) -> None:
        with contextlib.suppress(asyncio.CancelledError):
            while True:
                await asyncio.sleep(HEARTBEAT_INTERVAL)
                await self.send_json({"type": "heartbeat", "cursor": self.cursor})
