"""The brokers' transports: kombu's filesystem one with files that appear whole (the embedded
setup), and kombu's Redis one with one client object per channel (`RedisTransport`).

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
"""

import contextlib
import fcntl
import os
import uuid
from collections.abc import Iterator
from pathlib import Path
from time import monotonic
from typing import Any

from kombu.exceptions import ChannelError
from kombu.transport import filesystem
from kombu.transport import redis as kombu_redis
from kombu.transport.filesystem import exchange_queue_t
from kombu.utils.json import dumps, loads


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
    Channel = Channel


class RedisChannel(kombu_redis.Channel):
    """kombu's Redis channel, with one client object for its synchronous commands.

    kombu builds a new redis-py client (`redis.Redis(connection_pool=...)`) for each message it
    publishes and each one it acknowledges (`conn_or_acquire`), and a new client copies some
    two hundred response callbacks, a large part of a worker's consumer and of daphne's task
    publish (bench/README.md). A client is only a handle on the channel's connection pool,
    which redis-py makes safe to share; it is built again whenever kombu replaces the pool (it
    drops it when the connection is lost, and after a fork). kombu has no setting for this.
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
