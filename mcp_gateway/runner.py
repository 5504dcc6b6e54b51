"""The one upstream call an approved MCP request allows, made by a Celery worker.

The call's row (mcp_gateway.models.UpstreamCall) is written with its request, `waiting`. Once
the request is approved a worker claims it: one conditional UPDATE moves it to `claimed`, with
this worker's name and a lease it renews while the upstream works, so of two tasks for one
approval (the held call's and the sweep's, a redelivered message, a second worker) exactly one
calls. The upstream gets the request's id as the call's idempotency key. Its answer (or its
failure) is stored and the row is `done`; the held call, the task and a retry read it there.

A worker that dies mid-call (SIGKILL, a hard time limit, a lost machine) stops renewing; once
its lease has run out the sweep finishes the call as interrupted, with an error saying the
upstream may have run it. It is never called a second time for that approval: the upstream may
have acted, and only a person can say whether to try again (by approving a new call).

Tasks are sent by name (`mcp_gateway.tasks.call_upstream`): by the held call that sees the
approval (mcp_gateway.calls), and by beat's sweep for a call nobody holds, so no action imports
the tasks module and a decision of any other request costs nothing here.

The MCP client and its HTTP stacks (mcp_gateway.forward and .elicitation, mcp_types: some 35
MB), and the calls' record (mcp_gateway.actions, which brings the rate limits and redis-py),
are imported by the functions that use them, not with this module: every worker imports it
(through the tasks module) at start, and one that never relays a call, or only sweeps, never
needs them (issue 42).
"""

from __future__ import annotations

import asyncio
import logging
import os
import socket
import threading
import time
from datetime import timedelta
from typing import TYPE_CHECKING, Any
from uuid import UUID

from celery import current_app
from django.conf import settings
from django.db import DatabaseError, connection, transaction
from django.db.models import Q
from django.utils import timezone

from agents import external
from agents.models import Suspension
from infra.aio import run_in_process_loop
from mcp_gateway.models import Upstream, UpstreamCall

if TYPE_CHECKING:
    import mcp_types as types

log = logging.getLogger(__name__)

TASK = "mcp_gateway.tasks.call_upstream"
# The key under which the upstream gets the request's id, to recognise a call made again.
IDEMPOTENCY_META = "io.github.approval-gateway/idempotency-key"
# An approved call no task has claimed this long after its decision is sent by the sweep: a
# call nobody holds (a Tasks client polls; a held call gave up), or whose send was lost. A held
# call sends its own at once (mcp_gateway.calls); the margin spares sending it twice.
UNCLAIMED_AFTER = timedelta(seconds=1)
SWEEP_BATCH = 100

APPROVED = Q(suspension__status=Suspension.Status.APPROVED) | Q(
    suspension__status=Suspension.Status.TIMED_OUT, suspension__approved=True
)


def worker_name() -> str:
    return f"{socket.gethostname()}:{os.getpid()}"


def dump(result: types.CallToolResult) -> dict[str, Any]:
    return result.model_dump(mode="json", by_alias=True, exclude_none=True)


def _lease_end() -> Any:
    return timezone.now() + timedelta(seconds=settings.MCP_CALL_LEASE_SECONDS)


def send(pk: UUID) -> None:
    """Have a worker make the approved call of request `pk` (a duplicate claims nothing).
    Never raises: the sweep sends whatever this could not."""
    try:
        current_app.send_task(TASK, args=[str(pk)])
    except Exception:
        log.warning("could not enqueue the approved MCP call %s; the sweep will", pk, exc_info=True)


def approved_waiting(**where: Any) -> list[UUID]:
    return list(
        UpstreamCall.objects.filter(APPROVED, state=UpstreamCall.State.WAITING, **where)
        .order_by("pk")
        .values_list("suspension_id", flat=True)[:SWEEP_BATCH]
    )


def sweep() -> dict[str, int]:
    """Beat's catch-up: approved calls no task took (sent again), claims whose worker died
    (finished as interrupted), and calls whose request ended without approval (not run)."""
    now = timezone.now()
    unclaimed = approved_waiting(suspension__decided_at__lt=now - UNCLAIMED_AFTER)
    for pk in unclaimed:
        send(pk)
    interrupted = 0
    for call in UpstreamCall.objects.filter(
        state=UpstreamCall.State.CLAIMED, lease_until__lt=now
    ).select_related("suspension", "suspension__thread")[:SWEEP_BATCH]:
        interrupted += interrupt(call)
    not_run = (
        UpstreamCall.objects.filter(state=UpstreamCall.State.WAITING)
        .exclude(APPROVED)
        .exclude(suspension__status=Suspension.Status.PENDING)
        .update(state=UpstreamCall.State.NOT_RUN, finished_at=now)
    )
    return {"sent": len(unclaimed), "interrupted": interrupted, "not_run": not_run}


def interrupt(call: UpstreamCall) -> int:
    """Finish a claim whose lease ran out: its worker died during the upstream call."""
    from mcp_gateway import actions, forward

    s = call.suspension
    result = forward.failed(
        f"Interrupted: the gateway's worker stopped while {s.tool_name} was being called on "
        f"{s.agent_name} for request {s.pk}. The upstream may have run it (its idempotency key "
        "was the request's id); it is not called again. Check the upstream, and raise a new "
        "request if it should run.",
        request=str(s.pk),
        status="interrupted",
    )
    with transaction.atomic():
        n = UpstreamCall.objects.filter(
            pk=call.pk, state=UpstreamCall.State.CLAIMED, lease_until__lt=timezone.now()
        ).update(state=UpstreamCall.State.DONE, result=dump(result), finished_at=timezone.now())
        if n:
            seconds = (timezone.now() - call.claimed_at).total_seconds()
            actions.record_calls(
                [
                    actions.called(
                        s.thread.created_by,
                        s.agent_name,
                        s.tool_name,
                        call.arguments,
                        dump(result),
                        seconds,
                        s,
                        outcome="interrupted",
                    )
                ]
            )
    if n:
        log.warning("MCP call for request %s interrupted (worker %s)", s.pk, call.worker)
    return n


def claim(pk: UUID | str, arguments: dict[str, Any], me: str) -> bool:
    """Take the call of an approved request: True for exactly one claimant."""
    return bool(
        UpstreamCall.objects.filter(
            APPROVED, suspension_id=pk, state=UpstreamCall.State.WAITING
        ).update(
            state=UpstreamCall.State.CLAIMED,
            arguments=arguments,
            worker=me,
            lease_until=_lease_end(),
            claimed_at=timezone.now(),
        )
    )


class Renewal(threading.Thread):
    """Renews this worker's lease on a call every third of MCP_CALL_LEASE_SECONDS while the
    upstream works (as agents.leases.Heartbeat does a thread's)."""

    def __init__(self, pk: int, me: str) -> None:
        super().__init__(name=f"mcp-lease-{pk}", daemon=True)
        self.pk, self.me = pk, me
        self.stopped = threading.Event()

    def run(self) -> None:
        try:
            while not self.stopped.wait(max(settings.MCP_CALL_LEASE_SECONDS / 3, 0.05)):
                try:
                    UpstreamCall.objects.filter(
                        pk=self.pk, worker=self.me, state=UpstreamCall.State.CLAIMED
                    ).update(lease_until=_lease_end())
                except DatabaseError:
                    log.warning("MCP call %s: lease renewal failed", self.pk, exc_info=True)
        finally:
            connection.close()


async def _call(
    upstream: Upstream, s: Suspension, arguments: dict[str, Any]
) -> types.CallToolResult:
    from mcp_gateway import elicitation, forward

    limit = settings.MCP_CALL_TIMEOUT_SECONDS
    try:
        # A question the upstream asks meanwhile goes to a person (mcp_gateway.elicitation).
        asks = elicitation.callback(upstream, s.thread.created_by, s.tool_name)
        meta = {IDEMPOTENCY_META: str(s.pk)}
        return await asyncio.wait_for(
            forward.call(upstream, s.tool_name, arguments, meta=meta, elicit=asks), limit
        )
    except TimeoutError:
        return forward.failed(
            f"The upstream {upstream.name} did not answer {s.tool_name} within {limit} s; "
            "it may still act on it (idempotency key: the request's id)."
        )


def run(pk: UUID | str) -> str:
    """A worker's task: make the approved request's upstream call, if this worker claims it."""
    from mcp_gateway import actions

    s = Suspension.objects.select_related("thread", "thread__created_by").get(pk=pk)
    arguments = external.request_payload(s)["arguments"] or {}
    me = worker_name()
    if not claim(s.pk, arguments, me):
        return "not mine"  # not approved, or claimed or done by another task
    call = UpstreamCall.objects.get(suspension=s)
    upstream = Upstream.objects.filter(name=s.agent_name).first()
    started = time.monotonic()
    if upstream is None:
        from mcp_gateway import forward

        result = forward.failed(f"Not run: {s.agent_name} is no longer behind this gateway.")
    else:
        renewal = Renewal(call.pk, me)
        renewal.start()
        try:
            # On the worker's lasting loop: the upstream session its last call used is still
            # open (mcp_gateway.sessions), so the call is one request, not a handshake first.
            result = run_in_process_loop(_call(upstream, s, arguments))
        finally:
            renewal.stopped.set()
            renewal.join()
    with transaction.atomic():
        n = UpstreamCall.objects.filter(
            pk=call.pk, worker=me, state=UpstreamCall.State.CLAIMED
        ).update(state=UpstreamCall.State.DONE, result=dump(result), finished_at=timezone.now())
        if n:
            actions.record_calls(
                [
                    actions.called(
                        s.thread.created_by,
                        s.agent_name,
                        s.tool_name,
                        arguments,
                        dump(result),
                        time.monotonic() - started,
                        s,
                    )
                ]
            )
    if not n:
        log.warning("MCP call for request %s answered after its lease was given up", s.pk)
    return "called"
