"""One events socket's part in presence: the messages it sends, and the PRESENCE it gets.

A page sends, over `/ws/events/` (approvals.consumers hands these to this module):

    {"type": "view", "suspensions": [uuid, ...]}   the cards it shows now (at most 50), and
                                                   only those; [] for none
    {"type": "claim", "suspension": uuid}          "I am reviewing this" (who may decide)
    {"type": "release", "suspension": uuid}        give one's claim up

and gets PRESENCE messages (presence.board) for the cards it views, at once and then on every
change; a claim that is refused is answered with

    {"type": "CLAIM_REFUSED", "suspension": uuid, "error": code, "detail": text}

(`error`: forbidden, claimed, not_pending, not_found, invalid). Closing the socket releases its
claims and ends its views.
"""

import asyncio
import uuid
from typing import Any

from channels.db import database_sync_to_async

from presence import actions
from presence.board import board

MESSAGES = ("view", "claim", "release")
CLAIM_REFUSED = "CLAIM_REFUSED"
NO_DECIDE_SCOPE = "This token lacks the scope a claim needs: decide."


class PresenceSession:
    def __init__(self, user: Any, send: Any, may_claim: bool = True) -> None:
        self.user_id: int = user.pk
        # False for a socket whose credential may not decide whatever the user may (an API
        # token without the decide scope): it may look, not claim.
        self.may_claim = may_claim
        self.name = actions.display_name(user)
        self.socket = uuid.uuid4()
        self.views: set[str] = set()
        self.sent: dict[str, str] = {}  # suspension -> the last PRESENCE text sent
        self.out: dict[str, str] = {}  # suspension -> the newest PRESENCE waiting to be sent
        self.ready = asyncio.Event()
        self.send = send  # the consumer's send(text_data=...)
        self.board = board()
        self.joined = False
        self.wrote = False  # rows of this socket may exist

    @property
    def reviewer(self) -> actions.Reviewer:
        return actions.Reviewer(self.socket, self.board.process, self.user_id, self.name)

    def deliver(self, suspension: str, text: str) -> None:
        """Called by the board; a newer message for the same card replaces one still waiting."""
        self.out.pop(suspension, None)
        self.out[suspension] = text
        self.ready.set()

    async def pump(self) -> None:
        while True:
            await self.ready.wait()
            self.ready.clear()
            while self.out:
                key = next(iter(self.out))
                await self.send(text_data=self.out.pop(key))

    async def receive(self, content: dict[str, Any]) -> dict[str, Any] | None:
        """Apply one message of MESSAGES; returns the answer to send, if any."""
        kind = content.get("type")
        if kind == "view":
            await self.view(content.get("suspensions"))
            return None
        suspension = parse_uuid(str(content.get("suspension") or ""))
        if suspension is None:
            return refused(content.get("suspension"), "invalid", "Name a request by its id.")
        if kind == "claim" and not self.may_claim:
            return refused(str(suspension), "forbidden", NO_DECIDE_SCOPE)
        if kind == "claim":
            self.join()
            self.wrote = True
            refusal = await database_sync_to_async(actions.claim)(self.reviewer, suspension)
            if refusal is not None:
                return refused(str(suspension), refusal.error, refusal.detail)
            self.views.add(str(suspension))
            self.board.looked(self)
        elif not await database_sync_to_async(actions.release)(self.reviewer, suspension):
            return None
        await self.board.announce()
        return None

    async def view(self, ids: object) -> None:  # what the socket sent: checked here
        if not isinstance(ids, list):
            ids = []
        wanted = [u for u in (parse_uuid(str(i)) for i in ids[: actions.VIEW_LIMIT]) if u]
        if {str(u) for u in wanted} == self.views:
            return  # nothing to write: a page sends its views again on every reconnect
        self.join()
        self.wrote = True
        self.views = await database_sync_to_async(actions.look)(self.reviewer, wanted)
        for gone in set(self.sent) - self.views:
            del self.sent[gone]
        self.board.looked(self)
        await self.board.announce()

    def join(self) -> None:
        if not self.joined:
            self.joined = True
            self.board.join(self)

    async def leave(self) -> None:
        """The socket closed: release its claims, end its views, tell the others."""
        if not self.joined:
            return
        await self.board.leave(self)
        if self.wrote and await database_sync_to_async(actions.leave)(self.socket):
            await self.board.announce()


def parse_uuid(value: str) -> uuid.UUID | None:
    try:
        return uuid.UUID(value)
    except (ValueError, TypeError):
        return None


def refused(suspension: Any, error: str, detail: str) -> dict[str, Any]:
    return {
        "type": CLAIM_REFUSED,
        "suspension": suspension if isinstance(suspension, str) else None,
        "error": error,
        "detail": detail,
    }
