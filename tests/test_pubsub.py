"""infra.pubsub: a group message sent from synchronous code reaches the pub/sub layer's own
receivers, as the layer's group_send would; other layers are left to send for themselves."""

import asyncio
import uuid

import pytest
from channels.layers import InMemoryChannelLayer
from channels_redis.pubsub import RedisPubSubChannelLayer
from django.conf import settings

from infra.pubsub import sync_sender


@pytest.mark.skipif(
    not settings.REDIS_URL, reason="channels_redis's layer: run with REDIS_URL (CI's second half)"
)
def test_the_layers_receivers_get_what_the_sender_publishes_from_a_thread() -> None:
    layer = RedisPubSubChannelLayer(hosts=[settings.REDIS_URL], prefix=f"t{uuid.uuid4().hex}")
    message = {"type": "events.wake", "rows": [[1, '{"type": "AGENT_SUSPENDED"}', "t"]]}

    async def main() -> tuple[dict, dict]:
        channel = await layer.new_channel()
        other = await layer.new_channel()
        await layer.group_add("events", channel)
        await layer.group_add("others", other)
        sender = sync_sender(layer)
        assert sender is not None
        # From a thread with no event loop, as a worker's commit callback sends it.
        await asyncio.to_thread(sender.group_send, "events", message)
        await asyncio.to_thread(sender.group_send, "others", {"type": "x"})
        got = await asyncio.wait_for(layer.receive(channel), 5)
        got_other = await asyncio.wait_for(layer.receive(other), 5)
        await layer.flush()
        return got, got_other

    got, got_other = asyncio.run(main())
    assert got == message
    assert got_other == {"type": "x"}  # each group on its own channel


def test_other_layers_send_for_themselves() -> None:
    assert sync_sender(InMemoryChannelLayer()) is None
    assert sync_sender(None) is None
    # A host given with options (or a Sentinel) is the layer's to connect to.
    layer = RedisPubSubChannelLayer(
        hosts=[{"address": "redis://127.0.0.1:6379/0", "password": "x"}]
    )
    assert sync_sender(layer) is None
