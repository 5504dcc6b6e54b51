"""The beat lease: one beat sends the periodic tasks (the sweeper) at a time, on any number of
machines. A beat takes the lease or renews it at each tick and sends nothing while another holds
it; one that dies or hangs loses it when it runs out, and a waiting beat takes it over.

Beyond one machine the lease is a Redis key with an expiry, through redis-py's `Lock` (SET NX PX;
renewed and released with Lua scripts that check the token). Redis rather than a PostgreSQL
advisory lock: more than one machine needs Redis anyway (the broker, the channel layer), and a
key that expires frees the lease from a beat that hangs as well as from one that dies, where an
advisory lock lasts as long as the hung process's connection. The token is the holder's name
(host and pid), so anyone who reads the key sees who holds it (/readyz, the metrics).

On one machine without Redis (the embedded setup) it is a `flock` on a file in the data
folder, which the kernel frees when the holder dies; the file holds the holder's name.
"""

import fcntl
import logging
import os
import socket
from pathlib import Path
from typing import Protocol

import redis
from django.conf import settings
from redis.exceptions import LockError, RedisError

log = logging.getLogger(__name__)
# Redis calls give up after this long: a beat must not hang on an unreachable Redis.
REDIS_TIMEOUT = 2.0


def own_name() -> str:
    """This process as a lease holder: `host:pid`."""
    return f"{socket.gethostname()}:{os.getpid()}"


class Lease(Protocol):
    def take(self) -> bool:
        """Take the lease, or renew it if held; whether this process holds it now."""

    def release(self) -> None: ...


class RedisLease:
    def __init__(self, url: str, key: str, seconds: float, name: str) -> None:
        self.name = name
        client = redis.Redis.from_url(
            url, socket_timeout=REDIS_TIMEOUT, socket_connect_timeout=REDIS_TIMEOUT
        )
        # thread_local=False: the token set by acquire is read again by reacquire and release.
        self.lock = client.lock(key, timeout=seconds, blocking=False, thread_local=False)
        self.held = False

    def take(self) -> bool:
        try:
            if self.held:
                self.lock.reacquire()  # LockNotOwnedError once the lease ran out and moved on
            else:
                self.held = self.lock.acquire(token=self.name)
        except (LockError, RedisError) as exc:
            # Unrenewed, the lease cannot be known to be held: stop sending until taken again.
            if self.held:
                log.warning("beat lease lost by %s: %s", self.name, exc)
            self.held = False
        return self.held

    def release(self) -> None:
        if self.held:
            try:
                self.lock.release()
            except (LockError, RedisError):
                pass
            self.held = False


class FileLease:
    def __init__(self, path: Path, name: str) -> None:
        self.path = path
        self.name = name
        self.file: int | None = None

    def take(self) -> bool:
        if self.file is not None:
            return True
        fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(fd)
            return False
        os.ftruncate(fd, 0)
        os.pwrite(fd, self.name.encode(), 0)
        self.file = fd
        return True

    def release(self) -> None:
        if self.file is not None:
            os.ftruncate(self.file, 0)
            os.close(self.file)  # closing frees the flock
            self.file = None


def _path() -> Path:
    return Path(settings.DATA_DIR) / "beat.lease"


def lease(name: str | None = None) -> Lease:
    """The lease for this deployment, as the settings say (REDIS_URL, BEAT_LEASE_SECONDS)."""
    name = name or own_name()
    if settings.REDIS_URL:
        return RedisLease(
            settings.REDIS_URL, settings.BEAT_LEASE_KEY, settings.BEAT_LEASE_SECONDS, name
        )
    return FileLease(_path(), name)


def holder() -> str | None:
    """Who holds the lease now (`host:pid`), or None when nobody does. Raises RedisError when
    Redis does not answer."""
    if settings.REDIS_URL:
        client = redis.Redis.from_url(
            settings.REDIS_URL, socket_timeout=REDIS_TIMEOUT, socket_connect_timeout=REDIS_TIMEOUT
        )
        try:
            value = client.get(settings.BEAT_LEASE_KEY)
        finally:
            client.close()
        return value.decode() if value else None
    try:
        fd = os.open(_path(), os.O_RDONLY)
    except FileNotFoundError:
        return None
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
        except BlockingIOError:
            return os.pread(fd, 200, 0).decode() or None
        fcntl.flock(fd, fcntl.LOCK_UN)
        return None
    finally:
        os.close(fd)
