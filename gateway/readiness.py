"""`/readyz`: whether this process can serve and the deployment around it works: the database,
the broker, the channel layer (when there is one), the sweeper (it ran within
SWEEP_STALE_SECONDS) and the receipts' signing key (it opens with this machine's SECRET_KEY:
a machine given another secret key could decide nothing, as every decision signs a receipt).
503 naming what is down; also who holds the beat lease, and the gateway's version.

`/healthz` (approvals.views.health) stays the cheap liveness probe, touching nothing: a load
balancer takes a web process out on /readyz, a supervisor restarts one on /healthz."""

import time
from collections.abc import Callable

import redis
from django.conf import settings
from django.db import connections
from django.http import HttpRequest, JsonResponse

from agents import receipt_keys
from gateway.celery import app
from infra import beat_lease, last_runs
from infra.version import version

TIMEOUT = 2.0


def database() -> str | None:
    with connections["default"].cursor() as cursor:
        cursor.execute("SELECT 1")
    return None


def broker() -> str | None:
    with app.connection_for_write() as conn:
        conn.ensure_connection(max_retries=1, interval_start=0, timeout=TIMEOUT)
    return None


def channel_layer() -> str | None:
    layer = settings.CHANNEL_LAYERS.get("default")
    if layer is None:
        return None  # the embedded setup: sockets tail the Event table, no layer to check
    for host in layer["CONFIG"]["hosts"]:
        client = redis.Redis.from_url(host, socket_timeout=TIMEOUT, socket_connect_timeout=TIMEOUT)
        try:
            client.ping()
        finally:
            client.close()
    return None


def sweeper() -> str | None:
    when = last_runs.last_run("sweep")
    if when is None:
        return "has not run yet"
    ago = time.time() - when
    if ago > settings.SWEEP_STALE_SECONDS:
        limit = settings.SWEEP_STALE_SECONDS
        return f"last ran {ago:.0f} s ago (SWEEP_STALE_SECONDS is {limit})"
    return None


def receipts() -> str | None:
    receipt_keys.current()  # raises, saying so, when SECRET_KEY cannot open the key
    return None


CHECKS: dict[str, Callable[[], str | None]] = {
    "database": database,
    "broker": broker,
    "channel_layer": channel_layer,
    "sweeper": sweeper,
    "receipts": receipts,
}


def ready(request: HttpRequest) -> JsonResponse:
    down: dict[str, str] = {}
    for name, check in CHECKS.items():
        try:
            problem = check()
        except Exception as exc:  # whatever the failure, the probe names it instead of a 500
            problem = f"{type(exc).__name__}: {exc}"
        if problem:
            down[name] = problem
    try:
        holder = beat_lease.holder()
    except redis.RedisError:
        holder = None
    body = {"ok": not down, "down": down, "beat_lease_holder": holder, "version": version()}
    return JsonResponse(body, status=503 if down else 200)
