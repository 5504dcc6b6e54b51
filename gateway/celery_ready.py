"""`python -m gateway.celery_ready ARGS...` runs `celery ARGS...` and says when it is ready,
for `manage.py serve`: it creates the file named by GATEWAY_READY_FILE once a worker consumes
from its queues (Celery's worker_ready signal).

A wrapper rather than a line in gateway/celery.py: the signals are wanted only by serve's
processes, and a worker's own log says "ready" only at INFO, which serve keeps quiet."""

import os
import sys
import warnings
from pathlib import Path
from typing import Any

from celery.exceptions import SecurityWarning
from celery.signals import worker_ready


def _ready(**kwargs: Any) -> None:
    if path := os.environ.get("GATEWAY_READY_FILE"):
        Path(path).touch()


worker_ready.connect(_ready, weak=False)

# Celery's warning about running as root, a paragraph per worker: serve says it once, unless
# asked for everything (LOG_LEVEL at INFO or DEBUG).
if os.environ.get("LOG_LEVEL", "").upper() not in ("INFO", "DEBUG"):
    warnings.filterwarnings("ignore", category=SecurityWarning)


if __name__ == "__main__":
    from celery.__main__ import main

    sys.argv[0] = "celery"
    sys.exit(main())
