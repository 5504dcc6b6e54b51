"""The one Celery app: the worker that runs agents and the beat that drives the sweeper."""

import os

from celery import Celery
from celery.signals import task_postrun, task_prerun

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


@app.on_after_finalize.connect
def schedule_sweeper(sender: Celery, **kwargs: object) -> None:
    from django.conf import settings

    sender.add_periodic_task(
        settings.SWEEP_INTERVAL_SECONDS, sender.tasks["agents.tasks.sweep"], name="sweep"
    )
    # By name: the notify app's tasks may not be imported yet when the app is finalized.
    sender.add_periodic_task(
        settings.NOTIFY_INTERVAL_SECONDS, sender.signature("notify.tasks.dispatch"), name="notify"
    )
    sender.add_periodic_task(
        settings.SWEEP_INTERVAL_SECONDS, sender.signature("mcp_gateway.tasks.sweep"), name="mcp"
    )
