"""The brokers: the embedded one hands a consumer only whole messages, however fast it polls,
and wakes a consumer waiting for one when one is written rather than by listing its folder
over and over; the Redis one delivers through one client object per channel, made again with
a new pool; Celery's client side is built once per process, not per thread."""

import os
import threading
import time
import uuid
from pathlib import Path
from typing import Any

import pytest
from django.conf import settings
from kombu import Connection
from kombu.transport import filesystem
from kombu.transport import redis as kombu_redis

from infra.broker import RedisTransport, Transport
from infra.folder_watch import FolderWatch


def connection(folder: Path) -> Connection:
    return Connection(
        "filesystem://",
        transport=Transport,
        transport_options={
            "data_folder_in": str(folder),
            "data_folder_out": str(folder),
            "processed_folder": str(folder.parent / "processed"),
            "control_folder": str(folder.parent / "control"),
            "store_processed": False,
            "polling_interval": 0.05,  # as gateway.settings has it
        },
    )


def folders(tmp_path: Path) -> Path:
    folder = tmp_path / "out"
    folder.mkdir()
    (tmp_path / "processed").mkdir()
    return folder


def count_listings(
    monkeypatch: pytest.MonkeyPatch, folder: Path, listed: threading.Event | None = None
) -> list[int]:
    """How many times the current thread lists `folder` from now on (kombu's consumer lists it
    to look for messages): a list holding the count. `listed` is set after each listing."""
    count = [0]
    listdir = os.listdir
    thread = threading.current_thread()

    def counted(path: Any = ".") -> list[str]:
        names = listdir(path)
        if os.fspath(path) == str(folder) and threading.current_thread() is thread:
            count[0] += 1
            if listed is not None:
                listed.set()
        return names

    monkeypatch.setattr(filesystem.os, "listdir", counted)
    return count


class BrokerTestCase:
    def test_a_consumer_waiting_for_a_message_wakes_when_it_is_published(
        self, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        folder = folders(tmp_path)
        name = f"q{uuid.uuid4().hex}"
        looked_once = threading.Event()
        received: list[dict] = []
        looked: list[int] = []

        def consume() -> None:
            with connection(folder) as conn:
                # However long it waits: only the message's arrival can end the wait in time
                # for the join below.
                conn.transport.longest_wait = 3600
                queue = conn.SimpleQueue(name)
                # Published once it has looked and found nothing: it waits.
                count = count_listings(monkeypatch, folder, looked_once)
                message = queue.get(timeout=3600)
                looked.append(count[0])
                received.append(message.payload)
                message.ack()

        with connection(folder) as conn:
            conn.SimpleQueue(name).close()
        reader = threading.Thread(target=consume, daemon=True)
        reader.start()
        assert looked_once.wait(timeout=60)
        with connection(folder) as conn:
            conn.SimpleQueue(name).put({"n": 1})
        reader.join(timeout=60)

        assert received == [{"n": 1}]
        # It looked when it began, and once more when the message came (kombu's transport: once
        # every polling_interval).
        assert looked[0] <= 2

    def test_without_inotify_a_consumer_polls_and_still_gets_its_messages(
        self, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        # As where inotify is missing (not Linux) or out of watches (fs.inotify.max_user_watches).
        monkeypatch.setattr(FolderWatch, "of", classmethod(lambda cls, folder: None))
        folder = folders(tmp_path)
        name = f"q{uuid.uuid4().hex}"
        with connection(folder) as conn:
            queue = conn.SimpleQueue(name)
            with pytest.raises(queue.Empty):
                queue.get(timeout=0.2)

            def publish() -> None:
                with connection(folder) as other:
                    other.SimpleQueue(name).put({"n": 2})

            threading.Timer(0.1, publish).start()
            message = queue.get(timeout=60)
            message.ack()
            assert message.payload == {"n": 2}
            queue.close()

    def test_an_idle_consumer_does_not_keep_listing_its_folder(
        self, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        folder = folders(tmp_path)
        with connection(folder) as conn:
            queue = conn.SimpleQueue(f"q{uuid.uuid4().hex}")
            count = count_listings(monkeypatch, folder)
            # Celery's worker waits 2 s at a time; kombu's transport, polling every 0.05 s,
            # lists the folder some 40 times in that wait.
            with pytest.raises(queue.Empty):
                queue.get(timeout=2.0)
            queue.close()
        # Once when it began, once when its time was up.
        assert count[0] <= 2

    def test_a_consumer_polling_while_large_messages_are_written_reads_each_whole(
        self, tmp_path: Path
    ) -> None:
        folder = tmp_path / "out"
        folder.mkdir()
        (tmp_path / "processed").mkdir()
        body = "x" * 400_000  # large enough that a write takes several system calls
        count = 60
        received: list[dict] = []
        # Kombu keeps the filesystem transport's bindings in one state per process, so only a
        # process's first declaration of a queue writes the exchange table: a fresh name, and
        # the table written before the reader thread starts, as a worker's start-up does.
        name = f"q{uuid.uuid4().hex}"
        with connection(folder) as conn:
            conn.SimpleQueue(name).close()

        def consume() -> None:
            with connection(folder) as conn:
                queue = conn.SimpleQueue(name)
                deadline = time.monotonic() + 60
                while len(received) < count and time.monotonic() < deadline:
                    try:
                        message = queue.get(block=False)
                    except queue.Empty:
                        continue  # poll as fast as possible, to meet a file mid-write
                    received.append(message.payload)
                    message.ack()

        reader = threading.Thread(target=consume)
        reader.start()
        with connection(folder) as conn:
            queue = conn.SimpleQueue(name)
            for i in range(count):
                queue.put({"n": i, "body": body})
        reader.join(timeout=90)

        assert sorted(m["n"] for m in received) == list(range(count))
        assert all(m["body"] == body for m in received)
        assert not [p for p in folder.iterdir()]  # no partial files left behind

    def test_binding_queues_while_others_publish_never_shows_a_half_written_table(
        self, tmp_path: Path
    ) -> None:
        """Every process declares its queues at start-up, rewriting the exchange table, while
        others are publishing through it: a publish must never read the table half-written.
        (Threads stand in for processes: each binds queues of its own, which kombu's
        per-process state does not short-circuit.)"""
        folder = tmp_path / "out"
        folder.mkdir()
        (tmp_path / "processed").mkdir()
        errors: list[BaseException] = []
        stop = threading.Event()
        fan = f"fan{uuid.uuid4().hex}"

        def bind(n: int) -> None:
            try:
                with connection(folder) as conn:
                    channel = conn.default_channel
                    channel.exchange_declare(fan, type="fanout")
                    for i in range(150):
                        channel.queue_declare(f"{fan}-{n}-{i}")
                        channel.queue_bind(f"{fan}-{n}-{i}", fan, routing_key="", arguments=None)
            except BaseException as e:  # reported by the assertion below
                errors.append(e)

        def read() -> None:
            try:
                with connection(folder) as conn:
                    channel = conn.default_channel
                    while not stop.is_set():
                        channel.get_table(fan)
            except BaseException as e:
                errors.append(e)

        binders = [threading.Thread(target=bind, args=(n,)) for n in range(3)]
        reader = threading.Thread(target=read)
        reader.start()
        for t in binders:
            t.start()
        for t in binders:
            t.join(timeout=60)
        stop.set()
        reader.join(timeout=10)

        assert errors == []
        with connection(folder) as conn:
            table = conn.default_channel.get_table(fan)
        # No binding was lost to two writers truncating the same file.
        assert sorted(q.queue for q in table) == sorted(
            f"{fan}-{n}-{i}" for n in range(3) for i in range(150)
        )


def test_a_task_sent_from_a_new_thread_reuses_the_apps_result_backend() -> None:
    # daphne runs each request in a thread of its own; Celery must not build its backend again
    # (entry points scanned) for each of them when a view sends a task.
    from gateway.celery import app

    first = app.backend
    seen: list[object] = []
    for _ in range(3):
        t = threading.Thread(target=lambda: seen.append(app.backend))
        t.start()
        t.join()
    assert all(b is first for b in seen)


@pytest.mark.skipif(
    not settings.REDIS_URL, reason="the Redis transport: run with REDIS_URL (CI's second half)"
)
def test_the_redis_channel_delivers_through_one_client_made_again_with_a_new_pool(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    made: list[Any] = []
    make = kombu_redis.Channel._create_client

    def counted(channel: Any, asynchronous: bool = False) -> Any:
        client = make(channel, asynchronous)
        if not asynchronous:
            made.append(client)
        return client

    monkeypatch.setattr(kombu_redis.Channel, "_create_client", counted)
    name = f"test-broker-{uuid.uuid4().hex}"
    with Connection(settings.REDIS_URL, transport=RedisTransport) as conn:
        queue = conn.SimpleQueue(name)
        try:
            for n in range(5):
                queue.put({"n": n})
            received = []
            for _ in range(5):
                message = queue.get(timeout=5)
                received.append(message.payload["n"])
                message.ack()
            assert received == [0, 1, 2, 3, 4]
            # Five publishes, five gets and their acknowledgements: one client (kombu's own: 22).
            assert len(made) == 1
            # kombu drops the pool when the connection is lost: a client on the new one.
            channel = queue.channel
            old = made[0]
            channel._disconnect_pools()
            queue.put({"n": 5})
            message = queue.get(timeout=5)
            message.ack()
            assert message.payload == {"n": 5}
            assert len(made) == 2 and made[1] is not old
            assert made[1].connection_pool is channel.pool
        finally:
            queue.clear()
            queue.close()
