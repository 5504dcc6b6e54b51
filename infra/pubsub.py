"""A group message of channels_redis's pub/sub layer, sent from synchronous code.

channels_redis sends only from a running event loop: a worker handed each wake-up to a loop
thread of its own, and daphne's request threads hopped to the server's loop and waited for it,
on every commit that records events (bench/README.md). For that layer, a group message is one
Redis PUBLISH of the serialized message on the group's channel, `<prefix>__group__<group>`, on
the host the name hashes to (`RedisPubSubLoopLayer.group_send`); `SyncGroupSender` sends that
PUBLISH with redis-py's synchronous client, one per process and host. tests/test_pubsub.py
checks that the layer's own receivers get what it sends, and tests/test_tripwires.py the
private names it uses, so a change in channels_redis's naming fails there.
"""

import os
import threading
from typing import Any

import redis
from channels_redis.pubsub import RedisPubSubChannelLayer
from channels_redis.utils import _consistent_hash, decode_hosts
from redis.backoff import NoBackoff
from redis.retry import Retry

# A wake-up must not hold a request or a step up when Redis is away: the hubs' safety polls
# cover a lost one. One retry at once replaces a connection Redis closed (after a restart).
TIMEOUT = 2.0


class SyncGroupSender:
    def __init__(self, layer: RedisPubSubChannelLayer) -> None:
        self.layer = layer
        self.prefix = layer._kwargs.get("prefix", "asgi")
        self.clients = [
            redis.Redis.from_url(
                host["address"],
                socket_timeout=TIMEOUT,
                socket_connect_timeout=TIMEOUT,
                retry=Retry(NoBackoff(), 1),
            )
            for host in decode_hosts(layer._kwargs.get("hosts"))
        ]

    def group_send(self, group: str, message: dict[str, Any]) -> None:
        name = f"{self.prefix}__group__{group}"
        client = self.clients[_consistent_hash(name, len(self.clients))]
        client.publish(name, self.layer.serialize(message))


_senders: dict[tuple[int, int], SyncGroupSender] = {}
_lock = threading.Lock()


def sync_sender(layer: Any) -> SyncGroupSender | None:
    """This process's sender for `layer`, or None when the layer is not channels_redis's
    pub/sub one on plain Redis addresses (the caller sends through the layer itself)."""
    if not isinstance(layer, RedisPubSubChannelLayer):
        return None
    key = (id(layer), os.getpid())  # a forked worker child makes its own connections
    sender = _senders.get(key)
    if sender is None:
        hosts = decode_hosts(layer._kwargs.get("hosts"))
        if not hosts or any(set(host) != {"address"} for host in hosts):
            return None  # Sentinel or connection options: the layer knows them, not this
        with _lock:
            sender = _senders.setdefault(key, SyncGroupSender(layer))
    return sender
