"""One reader of claims and viewers per server process, fanned out to its sockets as PRESENCE.

Like approvals.hub for events: the board reads the presence rows of every suspension its
sockets look at, once per wake-up, and sends each socket what changed for the cards it shows.
With a channel layer a change made through any process wakes every board at once (the
PRESENCE_GROUP message), and SAFETY_POLL covers a lost wake-up; with no channel layer (the
embedded setup, where `WEB_PROCESSES` may still start several daphne processes on one SQLite
file) the board reads every POLL_INTERVAL. A claim lapses at its `expires_at`: the board reads
again right then, so the other pages drop it without waiting for a poll.

The message, one per suspension, made for the socket that gets it (its own user is left out of
the viewers, and `mine` says whether the claim is its user's):

    {"type": "PRESENCE", "suspension": uuid,
     "claim": {"user": name, "mine": bool, "claimed_at": iso, "expires_at": iso} | null,
     "viewers": [{"user": name}, ...], "more": int}

`viewers` are the other users looking at the card now, each once, by name, at most
VIEWERS_SHOWN; `more` counts the rest.
"""

import asyncio
import json
import logging
import uuid
import weakref
from dataclasses import dataclass
from datetime import datetime
from typing import Protocol

from channels.layers import get_channel_layer
from django.db import connection, transaction
from django.utils import timezone

from agents.models import Suspension
from infra import transactions
from infra.aio import blocking, detached_task, follow_group, wait_event
from presence import actions
from presence.models import Claim, Viewer

PRESENCE = "PRESENCE"
PRESENCE_GROUP = "presence"
WAKE = {"type": "presence.wake"}
POLL_INTERVAL = 0.25  # no channel layer: how often the rows are read
SAFETY_POLL = 1.0  # with a channel layer: a lost wake-up delays a change at most this long
VIEWERS_SHOWN = 10

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Holder:
    user_id: int
    name: str
    claimed_at: datetime
    expires_at: datetime


@dataclass(frozen=True)
class Card:
    """The presence of one suspension as last read: its claim, and who looks (user id, name)."""

    claim: Holder | None
    viewers: tuple[tuple[int, str], ...]

    def message(self, suspension: str, user_id: int) -> str:
        """The PRESENCE message for a socket of `user_id`."""
        others = [name for uid, name in self.viewers if uid != user_id]
        claim = None
        if self.claim is not None:
            claim = {
                "user": self.claim.name,
                "mine": self.claim.user_id == user_id,
                "claimed_at": self.claim.claimed_at.isoformat(),
                "expires_at": self.claim.expires_at.isoformat(),
            }
        return json.dumps(
            {
                "type": PRESENCE,
                "suspension": suspension,
                "claim": claim,
                "viewers": [{"user": name} for name in others[:VIEWERS_SHOWN]],
                "more": max(0, len(others) - VIEWERS_SHOWN),
            }
        )


EMPTY = Card(None, ())


class Session(Protocol):
    """A socket taking part in presence (presence.session.PresenceSession)."""

    socket: uuid.UUID
    user_id: int
    views: set[str]
    sent: dict[str, str]

    def deliver(self, suspension: str, text: str) -> None: ...


def read_state(suspensions: list[str]) -> dict[str, Card]:
    """The claims and viewers of these suspensions that hold now (blocking: call it in a
    thread). A claim on a suspension that was decided meanwhile holds no more."""
    now = timezone.now()
    stale = now - actions.STALE
    viewers: dict[str, dict[int, str]] = {}
    claims: dict[str, Holder] = {}
    # Both tables as of one moment: a socket's leave deletes its claim and its view in one
    # transaction, and two reads on either side of that commit showed the claim gone and the
    # view still there. PostgreSQL gives each statement of a READ COMMITTED transaction a
    # snapshot of its own, so the transaction asks for one snapshot (unless the caller's own
    # transaction has begun, as in a test case's); SQLite's read transaction is one already.
    begins = not transactions.in_transaction()
    with transaction.atomic():
        if begins and connection.vendor == "postgresql":
            with connection.cursor() as cursor:
                cursor.execute("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ READ ONLY")
        rows = Viewer.objects.filter(suspension_id__in=suspensions, seen_at__gte=stale)
        for sid, user_id, name in rows.values_list("suspension_id", "user_id", "name"):
            viewers.setdefault(str(sid), {})[user_id] = name
        held = Claim.objects.filter(
            suspension_id__in=suspensions,
            expires_at__gt=now,
            seen_at__gte=stale,
            suspension__status=Suspension.Status.PENDING,
        ).values_list("suspension_id", "user_id", "name", "claimed_at", "expires_at")
        for sid, user_id, name, claimed_at, expires_at in held:
            claims[str(sid)] = Holder(user_id, name, claimed_at, expires_at)
    return {
        sid: Card(
            claims.get(sid),
            tuple(sorted(viewers.get(sid, {}).items(), key=lambda v: (v[1].lower(), v[0]))),
        )
        for sid in suspensions
    }


class PresenceBoard:
    def __init__(self) -> None:
        self.process = uuid.uuid4()  # this board's rows, refreshed by its beat
        self.layer = get_channel_layer()
        self.sessions: set[Session] = set()
        self.cards: dict[str, Card] = {}
        self.wake = asyncio.Event()
        self.tasks: list[asyncio.Task] = []
        self.reads = 0

    def join(self, session: Session) -> None:
        self.sessions.add(session)
        if not self.tasks:
            self.tasks = [detached_task(self._run()), detached_task(self._beat())]
            if self.layer is not None:
                self.tasks.append(detached_task(self._listen()))

    async def leave(self, session: Session) -> None:
        self.sessions.discard(session)
        if self.sessions or not self.tasks:
            return
        tasks, self.tasks, self.cards = self.tasks, [], {}
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)

    def looked(self, session: Session) -> None:
        """The session's views changed: cards already read go to it now; others are read."""
        unknown = False
        for sid in session.views:
            card = self.cards.get(sid)
            if card is None:
                unknown = True
            else:
                self._send(session, sid, card)
        if unknown:
            self.wake.set()

    async def announce(self) -> None:
        """A change was written: read now here, and wake the other processes' boards."""
        self.wake.set()
        if self.layer is not None:
            try:
                await self.layer.group_send(PRESENCE_GROUP, WAKE)
            except Exception:
                log.warning("presence: the wake-up was not sent", exc_info=True)

    def _send(self, session: Session, sid: str, card: Card) -> None:
        text = card.message(sid, session.user_id)
        if session.sent.get(sid) != text:
            session.sent[sid] = text
            session.deliver(sid, text)

    async def _run(self) -> None:
        while True:
            self.wake.clear()
            try:
                await self._publish()
            except Exception:
                # The database is away: the next read tells what changed meanwhile.
                log.warning("presence: reading claims and viewers failed", exc_info=True)
            interval = POLL_INTERVAL if self.layer is None else SAFETY_POLL
            lapses = [c.claim.expires_at for c in self.cards.values() if c.claim is not None]
            if lapses:
                due = (min(lapses) - timezone.now()).total_seconds() + 0.01
                interval = max(0.0, min(interval, due))
            await wait_event(self.wake, interval)

    async def _publish(self) -> None:
        watched = sorted({sid for s in self.sessions for sid in s.views})
        if not watched:
            self.cards = {}
            return
        cards = await self._read(watched)
        changed = {sid for sid, card in cards.items() if self.cards.get(sid) != card}
        self.cards = cards
        for session in list(self.sessions):
            for sid in session.views:
                if sid in changed or sid not in session.sent:
                    self._send(session, sid, cards.get(sid, EMPTY))

    @blocking
    def _read(self, watched: list[str]) -> dict[str, Card]:
        self.reads += 1
        return read_state(watched)

    async def _beat(self) -> None:
        while True:
            await asyncio.sleep(actions.BEAT)
            try:
                sockets = [s.socket for s in self.sessions]
                if await blocking(actions.beat)(self.process, sockets):
                    await self.announce()
            except Exception:
                log.warning("presence: the beat failed", exc_info=True)

    async def _listen(self) -> None:
        await follow_group(self.layer, PRESENCE_GROUP, self._heard, SAFETY_POLL, "presence")

    async def _heard(self, message: dict) -> None:
        self.wake.set()


_boards: "weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, PresenceBoard]" = (
    weakref.WeakKeyDictionary()
)


def board() -> PresenceBoard:
    """The board of the running event loop (daphne runs one per process)."""
    loop = asyncio.get_running_loop()
    found = _boards.get(loop)
    if found is None:
        found = _boards[loop] = PresenceBoard()
    return found
