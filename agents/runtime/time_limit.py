"""A time limit on one tool call, enforced inside the call by SIGALRM.

Celery's own limits do not bound a call under every pool: its soft limit
(SoftTimeLimitExceeded) and hard limit need the prefork pool, where the parent signals or
kills a child; the solo pool (WORKER_POOL's default) and the threads pool ignore a task's
time limits. The worker runs a solo task in its main thread, so an alarm signal reaches it
there: the handler raises inside the call wherever it waits (a sleep, a socket, a lock), as
Celery's soft limit does in a prefork child. The call is not run in a thread of its own with
a deadline instead: a thread cannot be stopped, so a hung one would stay, holding its
database connection, and a tool would not see the test's or the task's connection.

A signal reaches only the main thread: elsewhere (the threads pool, a test's background
thread) the call runs without this limit, under the task's limits alone.
"""

import contextlib
import signal
import threading
import time
from collections.abc import Callable, Iterator
from types import FrameType


@contextlib.contextmanager
def time_limit(seconds: float | None, expired: Callable[[], BaseException]) -> Iterator[None]:
    """Raise `expired()` inside the block once it has run `seconds` (None: no limit). An
    alarm armed outside the block (an enclosing limit) is armed again after it, less the
    time the block took."""
    if (
        seconds is None
        or not hasattr(signal, "setitimer")
        or threading.current_thread() is not threading.main_thread()
    ):
        yield
        return

    def on_alarm(signum: int, frame: FrameType | None) -> None:
        raise expired()

    started = time.monotonic()
    previous = signal.signal(signal.SIGALRM, on_alarm)
    outer, _ = signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)
        if outer:
            left = outer - (time.monotonic() - started)
            signal.setitimer(signal.ITIMER_REAL, max(left, 0.001))
