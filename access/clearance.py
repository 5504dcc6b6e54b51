"""Whether a socket or stream may still be sent what was just read: the revocation guarantee.

Once a revocation has committed (a token revoked, expired or deleted, a user deactivated or
deleted, a session logged out), no event recorded after it reaches a socket or an A2A stream
opened with that credential. Every such change moves the revocation counter in its own
transaction (access.models.RevocationCounter), and an event recorded after the revocation
committed was written after the counter moved. So whoever is about to send events (the hub's
batches, a socket's own replay, an A2A stream) reads the counter *after* reading the events,
and asks `Clearances.admit` first: it checks the credentials again (access.revocation.
still_valid, a few queries for all the subscribers at once) only when the counter differs from
the one their last check read, and otherwise compares their expiry with the clock. The hot
path pays one primary-key read per batch of events, not one per socket.

A check is valid for a counter value read before it: the state it reads is at least that new.
A subscriber found revoked stays revoked.
"""

from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Protocol

from django.utils import timezone

from access.revocation import Credential, still_valid
from infra.aio import blocking


class Holder(Protocol):
    """A socket or stream that was opened with a credential (approvals.hub.Subscriber)."""

    credential: Credential

    async def revoke(self) -> None: ...


@dataclass(frozen=True)
class Clearance:
    revocations: int  # the counter read before the check that found the credential valid
    lapses: datetime | None  # when the credential expires by itself


class Clearances:
    """What the last check said of each subscriber of one hub."""

    def __init__(self) -> None:
        self.cleared: dict[Any, Clearance] = {}
        self.revoked: set[Any] = set()
        self.checks = 0  # credential checks made, for the tests that count them

    def forget(self, holder: Holder) -> None:
        self.cleared.pop(holder, None)
        self.revoked.discard(holder)

    async def admit(
        self, revocations: int, holders: Iterable[Holder], recheck: bool = False
    ) -> list[Holder]:
        """Those of `holders` that may be sent what was read before the counter read
        `revocations`; the others are revoked (Holder.revoke). `recheck`: check every
        credential again, whatever the counter (the periodic check, an announcement)."""
        holders = list(holders)
        stale = [
            h
            for h in holders
            if h not in self.revoked
            and (recheck or (c := self.cleared.get(h)) is None or c.revocations != revocations)
        ]
        if stale:
            self.checks += 1
            valid = await blocking(still_valid)([h.credential for h in stale])
            for holder in stale:
                if holder.credential in valid and holder not in self.revoked:
                    self.cleared[holder] = Clearance(revocations, valid[holder.credential])
                else:
                    self.revoked.add(holder)
        now = timezone.now()
        admitted = []
        for holder in holders:
            found = None if holder in self.revoked else self.cleared.get(holder)
            if found is not None and (found.lapses is None or found.lapses > now):
                admitted.append(holder)
            else:
                await self.revoke(holder)
        return admitted

    async def revoke(self, holder: Holder) -> None:
        """Revoke `holder` without asking: a logout, whose session is about to go."""
        self.cleared.pop(holder, None)
        self.revoked.add(holder)
        await holder.revoke()
