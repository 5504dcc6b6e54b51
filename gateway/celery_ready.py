"""`python -m gateway.celery_ready ARGS...` runs `celery ARGS...` and says when it is ready,
for `manage.py serve`: it creates the file named by GATEWAY_READY_FILE once a worker consumes
from its queues (Celery's worker_ready signal) or beat has started its schedule (beat_init).
With GATEWAY_BEAT_SCHEDULE set, a worker runs beat too, in a thread (serve's deadlines worker
when the machine has the beat role as well).

A wrapper rather than a line in gateway/celery.py: the signals are wanted only by serve's
processes, and a worker's own log says "ready" only at INFO, which serve keeps quiet."""

import os
import sys
import warnings
from pathlib import Path
from typing import Any

from celery.beat import EmbeddedService
from celery.exceptions import SecurityWarning
from celery.signals import beat_init, worker_ready, worker_shutdown


def _ready(**kwargs: Any) -> None:
    if path := os.environ.get("GATEWAY_READY_FILE"):
        Path(path).touch()


def _beat_inside(sender: Any, **kwargs: Any) -> None:
    """Beat in a thread of this worker, with gateway.beat's scheduler (which sends nothing
    until it holds the beat lease). Not Celery's `worker -B`: that forks a child which, once
    Python has touched its pages, holds nearly as much memory as a beat of its own
    (bench/footprint.py); the thread shares the worker's. Its schedule is the one a beat
    process of serve's would keep (GATEWAY_BEAT_SCHEDULE names the file)."""
    if not (schedule := os.environ.get("GATEWAY_BEAT_SCHEDULE")):
        return
    beat = EmbeddedService(
        sender.app,
        thread=True,
        schedule_filename=schedule,
        scheduler_cls="gateway.beat:LeasedScheduler",
    )
    # Stopped with the worker: the scheduler's close gives the beat lease back at once.
    worker_shutdown.connect(lambda **kwargs: beat.stop(), weak=False)
    beat.start()


worker_ready.connect(_ready, weak=False)
worker_ready.connect(_beat_inside, weak=False)
beat_init.connect(_ready, weak=False)

# Celery's warning about running as root, a paragraph per worker: serve says it once, unless
# asked for everything (LOG_LEVEL at INFO or DEBUG).
if os.environ.get("LOG_LEVEL", "").upper() not in ("INFO", "DEBUG"):
    warnings.filterwarnings("ignore", category=SecurityWarning)


if __name__ == "__main__":
    from celery.__main__ import main

    sys.argv[0] = "celery"
    sys.exit(main())
