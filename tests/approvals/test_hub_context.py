"""The events hub is shared by every socket and stream of a server process. Its reads and
checks must not queue behind anyone else's work: channels' database_sync_to_async sends every
socket's database call of the process to one shared thread, and a hub whose credentials check
waited there behind a slow call would keep a revoked token's streams open (CI once saw an A2A
stream outlive its deleted token by five minutes)."""

import asyncio
import threading
from typing import Any

import pytest
from asgiref.sync import sync_to_async

from access import tokens
from access.models import ApiToken, digest
from access.revocation import CHECK_INTERVAL, Credential
from approvals.hub import hub
from approvals.settled import Batch
from tests.approvals.test_consumer import in_thread


class Subscriber:
    def __init__(self, credential: Credential) -> None:
        self.credential = credential
        self.revoked = asyncio.Event()

    def deliver(self, batch: Batch) -> None:
        pass

    async def revoke(self) -> None:
        self.revoked.set()


@pytest.mark.parametrize("how", ["revoked", "deleted", "expired"])
def test_a_revoked_token_is_caught_while_the_shared_thread_is_busy(
    users: dict[str, Any], transactional_db: Any, how: str
) -> None:
    user = users["reviewer"]
    token, raw = tokens.create(user, "stream")

    def end() -> None:
        if how == "revoked":
            tokens.revoke(ApiToken.objects.get(pk=token.pk))
        elif how == "deleted":
            ApiToken.objects.filter(pk=token.pk).delete()
        else:
            from django.utils import timezone

            ApiToken.objects.filter(pk=token.pk).update(expires_at=timezone.now())

    async def scenario() -> None:
        events_hub = hub()
        first = Subscriber(Credential(user.pk))  # another socket of the same user
        events_hub.subscribe(first)
        stream = Subscriber(Credential(user.pk, token_digest=digest(raw)))
        events_hub.subscribe(stream)
        release = threading.Event()
        # Another socket's slow call holds the process's shared thread the whole time.
        busy = asyncio.ensure_future(
            sync_to_async(release.wait, thread_sensitive=True)(CHECK_INTERVAL * 4)
        )
        try:
            await asyncio.sleep(0.2)
            assert not stream.revoked.is_set()  # the token holds so far
            await in_thread(end)
            async with asyncio.timeout(CHECK_INTERVAL + 5):
                await stream.revoked.wait()
            assert not first.revoked.is_set()  # its user is still active
        finally:
            release.set()
            await busy
            await events_hub.unsubscribe(stream)
            await events_hub.unsubscribe(first)

    # A loop of its own, as daphne's: async_to_sync would lend its sync calls the test's own
    # thread, and hide what a server process does.
    asyncio.run(scenario())
