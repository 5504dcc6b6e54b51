"""The session's Celery worker, gated: the app it runs (`celery -A tests.worker_gate`) holds a
shared lock while a task runs, and `Gate`, on the test side, takes that lock exclusively from
the end of a test that used the worker to the start of the next one.

A test's flush (a TRUNCATE on PostgreSQL) meeting a task's transaction can deadlock, and a task
landing after the flush leaks into the next test's rows. The clock sends the sweeps on its own time,
so a test cannot wait them out; closing the gate instead waits for the tasks running to end and
holds every task that starts later (the clock's sweeps, a run's next step) at its start, until the
gate opens again. The product's code knows nothing of this: the worker runs gateway's app, with
these two signal handlers added.

Two `flock`s on files in the worker's folder: the gate, which a task holds shared while it runs,
and a turnstile a task passes through before taking the gate. The test side holds the turnstile
while it waits for the gate, so tasks that keep starting cannot starve it of the gate.
"""

import fcntl
import os
import time
from pathlib import Path
from typing import Any

from celery.signals import task_postrun, task_prerun

from gateway.celery import app

__all__ = ["app", "Gate"]

# The worker's folder for the two files; set by tests.conftest.WorkerProcess.
FOLDER = "TEST_WORKER_GATE"
# How long a test waits for the tasks still running when it ends; a tool's time limit in the
# tests is seconds, so this is only reached by a task that never ends.
CLOSE_TIMEOUT = 120.0

_held: list[int] = []  # the gate's descriptor while this process runs a task


def _lock(folder: Path, name: str, mode: int) -> int:
    fd = os.open(folder / name, os.O_RDWR | os.O_CREAT, 0o600)
    fcntl.flock(fd, mode)
    return fd


@task_prerun.connect
def _enter(**kwargs: Any) -> None:
    folder = os.environ.get(FOLDER)
    # A task run inside another one (apply()) is already in.
    if not folder or _held:
        return
    os.close(_lock(Path(folder), "turnstile", fcntl.LOCK_EX))
    _held.append(_lock(Path(folder), "gate", fcntl.LOCK_SH))


@task_postrun.connect
def _leave(**kwargs: Any) -> None:
    while _held:
        os.close(_held.pop())  # closing the descriptor releases its lock


class Gate:
    """The test side: `close` returns once no task runs, and none starts until `open`."""

    def __init__(self, folder: Path) -> None:
        self.folder = folder
        self.held: list[int] = []

    @property
    def closed(self) -> bool:
        return bool(self.held)

    def close(self, timeout: float = CLOSE_TIMEOUT) -> None:
        if self.held:
            return
        self.held.append(_lock(self.folder, "turnstile", fcntl.LOCK_EX))
        gate = os.open(self.folder / "gate", os.O_RDWR | os.O_CREAT, 0o600)
        self.held.append(gate)

        deadline = time.monotonic() + timeout
        while True:
            try:
                fcntl.flock(gate, fcntl.LOCK_EX | fcntl.LOCK_NB)
                return
            except BlockingIOError:
                if time.monotonic() > deadline:
                    self.open()
                    raise AssertionError(
                        f"a task of the worker still ran {timeout}s after the test ended"
                    ) from None
                time.sleep(0.05)

    def open(self) -> None:
        while self.held:
            os.close(self.held.pop())
