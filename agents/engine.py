"""The worker's side: take a thread, run its stack until it needs someone, save every step.

`advance(thread_id)` is what the Celery tasks call. It claims the thread with a lease (a
conditional update, so at most one worker runs a thread: invariant 3; agents.leases), then
runs it (agents.runs.Run): a loop over the stack, top frame first, without recursion.

A tool runs outside any database transaction, so a slow tool holds no lock that a decision, a
cancel or another thread needs. Before it runs, the assistant message that asked for it is
saved (its tool_use id becomes durable); after it, its result is saved in one transaction with
its events, and a result already saved is never run again. A worker killed while a tool runs
leaves no result: the call runs again from the start, under the same idempotency key
(ToolContext.idempotency_key), which tools with outside effects use to act once.
"""

import logging
import uuid
from collections.abc import Callable
from typing import Any

from django.db import InterfaceError, OperationalError
from django.utils import timezone

from agents import leases, statements
from agents.leases import Heartbeat, Lease, LeaseLost
from agents.models import StackFrame
from agents.providers import default_provider
from agents.runs import Run
from agents.runtime.llm import LLMProvider
from agents.runtime.subagents import AgentResolver
from agents.runtime.tools import ToolRegistry
from agents.runtime.tools import registry as default_registry
from agents.runtime.turn import Frame
from agents.starting import find_agent

log = logging.getLogger(__name__)


class Engine:
    """Runs threads. What a test must control is an attribute: the tools, the LLM, the clock,
    and where use_skill/use_agent look agents up."""

    def __init__(
        self,
        tools: ToolRegistry | None = None,
        provider: Callable[[Frame], LLMProvider] = default_provider,
        clock: Callable[[], Any] = timezone.now,
        agents: AgentResolver = find_agent,
    ) -> None:
        self.tools = tools or default_registry
        self.provider = provider
        self.clock = clock
        self.agents = agents

    def advance(self, thread_id: uuid.UUID | str) -> bool:
        """Run the thread if it is runnable and free; returns whether this call ran it."""
        lease = Lease(self.clock)
        now = self.clock()
        claimed = statements.claim_lease(thread_id, lease.owner, lease.until(), now)
        if not claimed:
            return False
        heartbeat = Heartbeat(lease.until, thread_id, lease.owner)
        heartbeat.start()
        try:
            run = Run(self, statements.thread_with_agent(thread_id), lease)
            self._drive(run, thread_id)
        finally:
            heartbeat.stop()
            if not lease.released:
                leases.release_thread(thread_id, lease.owner)
        return True

    def advance_instance(self, frame_id: int | str) -> bool:
        """Run an agent instance's lane if it is runnable and free (the same rules as
        `advance`, under the instance's own lease, so instances of one thread run side by
        side on different workers); returns whether this call ran it."""
        lease = Lease(self.clock)
        now = self.clock()
        claimed = leases.claim_lane(frame_id, lease.owner, lease.until(), now)
        if not claimed:
            return False
        heartbeat = Heartbeat(lease.until, frame_id, lease.owner, lane=True)
        heartbeat.start()
        try:
            lane = StackFrame.objects.select_related("thread__agent").get(pk=frame_id)
            run = Run(self, lane.thread, lease, lane=lane)
            self._drive(run, lane.thread_id)
        finally:
            heartbeat.stop()
            if not lease.released:
                leases.release_lane(frame_id, lease.owner)
        return True

    def _drive(self, run: Run, thread_id: uuid.UUID | str) -> None:
        try:
            run.drive()
        except LeaseLost:
            log.info("thread %s: lease lost, stopping", thread_id)
        except (OperationalError, InterfaceError):
            raise  # transient: the task retries, and the saved steps are not run again
        except Exception as e:
            # A bug or a broken row would otherwise leave the thread runnable, and the sweeper
            # would enqueue it again forever: fail it, with what went wrong, and keep the trace.
            log.exception("thread %s failed unexpectedly", thread_id)
            run.fail_unexpectedly(e)


engine = Engine()
