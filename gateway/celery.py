"""The one Celery app: the worker that runs agents and the beat that drives the sweeper."""

import os

from celery import Celery

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "gateway.settings")

app = Celery("gateway")
app.config_from_object("django.conf:settings", namespace="CELERY")
app.autodiscover_tasks()


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
