"""Celery tasks: make an approved MCP call upstream, and the sweep that catches up on them."""

from celery import shared_task
from django.db import InterfaceError, OperationalError

from mcp_gateway import runner


@shared_task(
    acks_late=True,
    reject_on_worker_lost=True,
    ignore_result=True,
    # A busy SQLite file or a dropped connection before the claim: tried again. After the
    # claim the call is this task's or, if it dies, the sweep's to finish; never made twice.
    autoretry_for=(OperationalError, InterfaceError),
    retry_backoff=0.2,
    max_retries=5,
)
def call_upstream(suspension_id: str) -> str:
    return runner.run(suspension_id)


@shared_task(ignore_result=True, expires=5)
def sweep() -> dict[str, int]:
    """Driven by beat every SWEEP_INTERVAL_SECONDS (mcp_gateway.runner.sweep)."""
    return runner.sweep()
