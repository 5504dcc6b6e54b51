"""A waiter on this process's event hub (approvals.hub): woken when an event that names one
thread or one request comes, and told when the credential it was opened with is revoked. It
reads what it waits for itself; the hub only saves it polling (the A2A streams and the
outside agents' long poll wait through it)."""

import asyncio
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

from access.revocation import Credential
from approvals.hub import EventHub, hub
from approvals.settled import Batch
from infra.aio import wait_event


class Waiter:
    def __init__(self, field: str, value: str, credential: Credential, events_hub: EventHub):
        self.credential = credential
        self.hub = events_hub
        # How the hub's socket message of such an event names it (agents.wire).
        self.marker = f'"{field}": "{value}"'
        self.woken = asyncio.Event()
        self.revoked = False

    def deliver(self, batch: Batch) -> None:
        if any(self.marker in row.text for row in batch.rows):
            self.woken.set()

    async def revoke(self) -> None:
        self.revoked = True
        self.woken.set()

    async def wait(self, seconds: float) -> None:
        """Until woken or `seconds` have passed; then ready to be woken again."""
        await wait_event(self.woken, seconds)
        self.woken.clear()

    async def admits(self, revocations: int) -> bool:
        """May the events read before the revocation counter read `revocations` be sent?"""
        return not self.revoked and await self.hub.admits(self, revocations)


@asynccontextmanager
async def waiting(field: str, value: str, credential: Credential) -> AsyncIterator[Waiter]:
    """A Waiter subscribed to the process's hub for the block: subscribe before the first
    read, so an event written between a read and the wait still wakes it."""
    events_hub = hub()
    waiter = Waiter(field, value, credential, events_hub)
    events_hub.subscribe(waiter)
    try:
        yield waiter
    finally:
        await events_hub.unsubscribe(waiter)
