"""The brokers' transports: kombu's filesystem one with files that appear whole (the embedded
setup), and kombu's Redis one with one client object per channel (`RedisTransport`, made on
first use).

Kombu writes a message straight into the folder its consumers poll, so a worker can read a
file before it has been written and die on the half-written JSON (celery/kombu#1551). The
exchange tables in the control folder have the same race: `_queue_bind` creates the file
empty and fills it afterwards, so a process publishing at that moment (daphne, beat or a
worker starting up) reads an empty table and fails. This channel writes every file to a
hidden name first and renames it into place, which POSIX makes atomic, and serializes the
writers of an exchange table on a lock file of its own. A consumer's filter
(`<name>.<queue>.msg`) never matches a hidden name.

Kombu's consumer takes a queue's files in the order of their names. A message's name starts
with its priority (0, unset, first; the clock's runs are sent with 9: agents.dispatch), then
the time it was written, padded so that the names sort as the numbers do: the order Redis
gives with its list per priority step.

A consumer with nothing to read sleeps until a message file is renamed into its folder
(inotify), not polling it: kombu's transport lists the folder every `polling_interval`
whatever happens, which kept every idle worker awake 20 times a second (issue 42).
"""

import contextlib
import fcntl
import functools
import os
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from time import monotonic
from typing import Any

from kombu.exceptions import ChannelError
from kombu.transport import filesystem
from kombu.transport.filesystem import exchange_queue_t
from kombu.utils.json import dumps, loads

from infra.folder_watch import FolderWatch


def write_whole(path: Path | str, data: bytes) -> None:
    """Readers see the old file or the new one, never a part of it."""
    folder = os.path.dirname(path)
    partial = os.path.join(folder, f".partial-{uuid.uuid4().hex}")
    try:
        with open(partial, "wb") as f:
            f.write(data)
        os.rename(partial, path)
    except OSError as exc:
        with contextlib.suppress(OSError):
            os.unlink(partial)
        raise ChannelError(f"Cannot write {path!r}") from exc


class Channel(filesystem.Channel):
    def _put(self, queue: str, payload: Any, **kwargs: Any) -> None:
        priority = self._get_message_priority(payload)
        name = f"{priority}-{int(round(monotonic() * 1000)):015d}_{uuid.uuid4()}.{queue}.msg"
        write_whole(os.path.join(self.data_folder_out, name), dumps(payload).encode())

    # Exchange tables ----------------------------------------------------------------------

    @contextlib.contextmanager
    def _table_lock(self, exchange: str) -> Iterator[Path]:
        file = self._exchange_file(exchange)
        self.control_folder.mkdir(exist_ok=True)
        with open(self.control_folder / f".{exchange}.exchange.lock", "a") as lock:
            fcntl.flock(lock.fileno(), fcntl.LOCK_EX)
            try:
                yield file
            finally:
                fcntl.flock(lock.fileno(), fcntl.LOCK_UN)

    def _read_table(self, file: Path) -> list[Any]:
        try:
            text = file.read_text()
        except FileNotFoundError:
            return []
        except OSError as exc:
            raise ChannelError(f"Cannot open {file}") from exc
        return [exchange_queue_t(*q) for q in loads(text)] if text.strip() else []

    def get_table(self, exchange: str) -> list[Any]:
        return self._read_table(self._exchange_file(exchange))

    def _queue_bind(self, exchange: str, routing_key: str, pattern: str, queue: str) -> None:
        bound = exchange_queue_t(routing_key or "", pattern or "", queue or "")
        with self._table_lock(exchange) as file:
            queues = self._read_table(file)
            if bound not in queues:
                write_whole(file, dumps([bound, *queues]).encode())

    def _delete(
        self, queue: str, exchange: str, routing_key: str, pattern: str, *args: Any, **kwargs: Any
    ) -> None:
        # Skip kombu's filesystem version, which rewrites the table in place.
        super(filesystem.Channel, self)._delete(
            queue, exchange, routing_key, pattern, *args, **kwargs
        )
        bound = exchange_queue_t(routing_key or "", pattern or "", queue or "")
        with self._table_lock(exchange) as file:
            queues = self._read_table(file)
            if bound in queues:
                queues.remove(bound)
                write_whole(file, dumps(queues).encode())


class Transport(filesystem.Transport):
    """kombu's filesystem transport, whose consumer waits for a message file to appear.

    kombu's `drain_events` polls each queue's folder and sleeps `polling_interval` between
    empty polls until its timeout (Celery's worker asks for 2 s at a time). This one polls
    once (kombu's own, with a timeout of 0), then waits on inotify for a file renamed into the
    folder, up to the timeout: an idle worker lists its folder once every 2 s, and a message
    is read as soon as it is written, not up to a poll later. kombu's sleep stays where the
    wait cannot help: without inotify, and while a consumer has as many messages unacknowledged
    as its prefetch allows (the threads or prefork pool, busy), when what it waits for is an
    acknowledgement, not a file.
    """

    Channel = Channel
    # How long one wait lasts at most when the caller gives no timeout: a bound on the delay
    # of a message the watch could not see (written by another machine sharing the folder
    # over NFS, which inotify does not report).
    longest_wait = 2.0
    _watch: FolderWatch | None = None
    _unwatchable = False  # inotify could not watch the folder: kombu's polling

    def drain_events(self, connection: Any, timeout: float | None = None) -> None:
        began = time.monotonic()
        while True:
            watch = self._folder_watch()
            try:
                return super().drain_events(connection, timeout=0)  # one pass, no sleep
            except TimeoutError:
                if timeout is not None and time.monotonic() - began >= timeout:
                    raise
            left = self.longest_wait
            if timeout is not None:
                left = min(left, timeout - (time.monotonic() - began))
            if watch is None or any(not c.qos.can_consume() for c in self.channels):
                time.sleep(min(left, self.polling_interval or left))
            else:
                watch.wait(left)

    def _folder_watch(self) -> FolderWatch | None:
        """The watch on the folder consumed, made before the first poll (so that no file
        renamed in between goes unseen); None where inotify is unavailable."""
        watch = self._watch
        if watch is not None and not watch.usable():
            watch.close()
            watch = self._watch = None
        if watch is None and not self._unwatchable:
            folder = self.client.transport_options.get("data_folder_in", "data_in")
            watch = self._watch = FolderWatch.of(folder)
            self._unwatchable = watch is None
        return watch

    def close_connection(self, connection: Any) -> None:
        if self._watch is not None:
            self._watch.close()
            self._watch = None
        super().close_connection(connection)


def __getattr__(name: str) -> Any:
    """`RedisChannel` and `RedisTransport`, made when first asked for (Celery asks for the
    transport its settings name): kombu's Redis transport imports redis-py, some 6 MB in every
    process of the embedded setup, which never uses it (issue 42)."""
    if name in ("RedisChannel", "RedisTransport"):
        return _redis_classes()[name]
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


@functools.cache
def _redis_classes() -> dict[str, type]:
    from kombu.transport import redis as kombu_redis

    class RedisChannel(kombu_redis.Channel):
        """kombu's Redis channel, with one client object for its synchronous commands.

        kombu builds a new redis-py client (`redis.Redis(connection_pool=...)`) for each
        message it publishes and each one it acknowledges (`conn_or_acquire`), and a new
        client copies some two hundred response callbacks, a large part of a worker's consumer
        and of daphne's task publish (bench/README.md). A client is only a handle on the
        channel's connection pool, which redis-py makes safe to share; it is built again
        whenever kombu replaces the pool (it drops it when the connection is lost, and after a
        fork). kombu has no setting for this.
        """

        _sync_client: Any = None

        def _create_client(self, asynchronous: bool = False) -> Any:
            if asynchronous:
                return super()._create_client(asynchronous=True)
            client = self._sync_client
            if client is None or client.connection_pool is not self.pool:
                client = self._sync_client = super()._create_client()
            return client

    class RedisTransport(kombu_redis.Transport):
        Channel = RedisChannel

    for made in (RedisChannel, RedisTransport):
        made.__qualname__ = made.__name__
    return {"RedisChannel": RedisChannel, "RedisTransport": RedisTransport}
