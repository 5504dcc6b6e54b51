"""The one Celery app: the workers that run agents, and the deadlines worker that hosts the
clock (gateway.clock), which runs the sweeper and the channels' rounds when they fall due."""

import os
from typing import TYPE_CHECKING

from celery import Celery
from celery.signals import task_postrun, task_prerun, worker_ready, worker_shutdown

if TYPE_CHECKING:
    from gateway.clock import Clock

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "gateway.settings")

app = Celery("gateway")
app.config_from_object("django.conf:settings", namespace="CELERY")
# Celery's Django fixup closes every connection before and after each task and, in a prefork
# child, the whole connection pool with them: each task then opened a new PostgreSQL
# connection (a server process forked, authentication), costlier than the task itself
# (bench/README.md). It does that only every CELERY_DB_REUSE_MAX tasks; made effectively
# never here, and `give_back` below returns the connections to the pool after each task
# instead, dropping the ones that broke (as Django does at the end of a request).
app.conf.update(CELERY_DB_REUSE_MAX=2**62)
app.autodiscover_tasks()


@task_prerun.connect
@task_postrun.connect
def give_back(**kwargs: object) -> None:
    from django.db import connections

    for conn in connections.all(initialized_only=True):
        conn.close_if_unusable_or_obsolete()


# The worker's clock, when it hosts one (GATEWAY_CLOCK: `manage.py serve` sets it in the
# process that runs the beat role: the clock is that role now).
CLOCK = "GATEWAY_CLOCK"
_clocks: list["Clock"] = []


@worker_ready.connect
def start_clock(**kwargs: object) -> None:
    if os.environ.get(CLOCK, "").lower() not in ("1", "true", "yes", "on"):
        return
    # Here, not at the top: the clock reads the engine's rows, so Django must be set up.
    from gateway.clock import Clock

    clock = Clock(app)
    clock.start()
    _clocks.append(clock)


@worker_shutdown.connect
def stop_clock(**kwargs: object) -> None:
    while _clocks:
        _clocks.pop().stop()
