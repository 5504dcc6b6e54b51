"""The A2A SDK's RequestHandler on the gateway's rows: each method runs a2a_server.service in
a worker thread; the streams poll the Event table, the truth, from a cursor. A stream sends
what it read, its first answer (the task as it is) included, only once the hub has cleared its
token against the revocation counter read after those rows (access.clearance): nothing
recorded after a revocation reaches it. A SendMessage that waited for its task answers under
the same rule; a token revoked (or its user deactivated) after the call was authenticated
gets 401 instead of the task.

The SDK's DefaultRequestHandler is not used: it runs the agent in the server process through an
AgentExecutor and keeps tasks in its own store and in-memory queues, while here agents run on
Celery workers and a task is a thread, read by any number of server processes.
"""

import contextlib
import time
from collections.abc import AsyncGenerator, AsyncIterator, Awaitable
from dataclasses import dataclass
from typing import Any

from a2a.server.context import ServerCallContext
from a2a.server.request_handlers.request_handler import RequestHandler
from a2a.types import (
    AgentCard,
    CancelTaskRequest,
    DeleteTaskPushNotificationConfigRequest,
    GetExtendedAgentCardRequest,
    GetTaskPushNotificationConfigRequest,
    GetTaskRequest,
    ListTaskPushNotificationConfigsRequest,
    ListTaskPushNotificationConfigsResponse,
    ListTasksRequest,
    ListTasksResponse,
    Message,
    SendMessageRequest,
    SubscribeToTaskRequest,
    Task,
    TaskArtifactUpdateEvent,
    TaskPushNotificationConfig,
    TaskStatusUpdateEvent,
    UnsupportedOperationError,
)

from a2a_server import mapping, push, reads, service
from a2a_server.access import Denied
from approvals.waiters import Waiter, waiting
from infra.aio import blocking

Update = Task | TaskStatusUpdateEvent | TaskArtifactUpdateEvent
# Seconds a waiter sleeps when the hub wakes it for nothing: a lost wake-up (or an event the
# hub has not read yet) delays an update at most this long.
SAFETY_POLL = 1.0
# How long a SendMessage waits for its task to stop working (a terminal state, or one that
# waits for someone) before it answers with the working task; GetTask and SubscribeToTask
# follow it from there. Clients and proxies rarely wait longer.
SEND_WAIT = 120.0
LAST_EVENT_ID = "last-event-id"
REVOKED = "The token was revoked, or its user deactivated."


@dataclass(frozen=True, order=True)
class Cursor:
    """Where a stream is: every update up to the `index`-th one of event `event` was sent.
    As an SSE id and in each update's metadata (eventId): "12" (all of event 12), "12-0"."""

    event: int
    index: int = 1 << 30

    def __str__(self) -> str:
        return str(self.event) if self.index == 1 << 30 else f"{self.event}-{self.index}"

    @classmethod
    def parse(cls, text: str) -> "Cursor | None":
        event, _, index = text.strip().partition("-")
        if not event.isascii() or not event.isdigit():
            return None
        if not index:
            return cls(int(event))
        return cls(int(event), int(index)) if index.isascii() and index.isdigit() else None


def user_of(context: ServerCallContext) -> Any:
    return context.state["user"]


class GatewayRequestHandler(RequestHandler):
    async def on_get_task(self, params: GetTaskRequest, context: ServerCallContext) -> Task:
        length = params.history_length if params.HasField("history_length") else None
        return await blocking(reads.get_task)(user_of(context), params.id, length)

    async def on_list_tasks(
        self, params: ListTasksRequest, context: ServerCallContext
    ) -> ListTasksResponse:
        return await blocking(reads.list_tasks)(user_of(context), params)

    async def on_cancel_task(self, params: CancelTaskRequest, context: ServerCallContext) -> Task:
        return await blocking(service.cancel)(user_of(context), params.id)

    async def on_message_send(
        self, params: SendMessageRequest, context: ServerCallContext
    ) -> Task | Message:
        """Start or continue a task; unless the client asked to return at once, answer when
        the task has ended or waits for someone (A2A SendMessageConfiguration)."""
        task_id = await blocking(service.send)(user_of(context), params)
        length = (
            params.configuration.history_length
            if params.configuration.HasField("history_length")
            else None
        )
        async with watching(task_id, context) as waiter:
            if not params.configuration.return_immediately:
                await settled(task_id, context, waiter)
            found = await cleared(waiter, blocking(reads.snapshot)(task_id, length))
        return found.task

    async def on_message_send_stream(
        self, params: SendMessageRequest, context: ServerCallContext
    ) -> AsyncGenerator[Update]:
        """The task, then its updates as they happen, until it ends or waits for someone."""
        task_id = await blocking(service.send)(user_of(context), params)
        async with watching(task_id, context) as waiter:
            found = await cleared(waiter, blocking(reads.snapshot)(task_id))
            yield found.task
            if found.state in mapping.TERMINAL | mapping.INTERRUPTED:
                return
            async for update in updates(task_id, Cursor(found.cursor), waiter):
                yield update

    async def on_subscribe_to_task(
        self, params: SubscribeToTaskRequest, context: ServerCallContext
    ) -> AsyncGenerator[Update]:
        """The task now, then its updates after the client's Last-Event-ID (an SSE id or an
        update's eventId) or, without one, after what the task shows; until it ends or next
        waits for someone."""
        header = context.state["headers"].get(LAST_EVENT_ID)
        cursor = Cursor.parse(header) if header else None
        async with watching(params.id, context) as waiter:
            found = await cleared(waiter, blocking(reads.subscription)(user_of(context), params.id))
            yield found.task
            async for update in updates(params.id, cursor or Cursor(found.cursor), waiter):
                yield update

    async def on_create_task_push_notification_config(
        self, params: TaskPushNotificationConfig, context: ServerCallContext
    ) -> TaskPushNotificationConfig:
        return await blocking(push.create)(user_of(context), params)

    async def on_get_task_push_notification_config(
        self, params: GetTaskPushNotificationConfigRequest, context: ServerCallContext
    ) -> TaskPushNotificationConfig:
        return await blocking(push.get)(user_of(context), params.task_id, params.id)

    async def on_list_task_push_notification_configs(
        self, params: ListTaskPushNotificationConfigsRequest, context: ServerCallContext
    ) -> ListTaskPushNotificationConfigsResponse:
        return await blocking(push.list_configs)(
            user_of(context), params.task_id, params.page_size, params.page_token
        )

    async def on_delete_task_push_notification_config(
        self, params: DeleteTaskPushNotificationConfigRequest, context: ServerCallContext
    ) -> None:
        await blocking(push.delete)(user_of(context), params.task_id, params.id)

    async def on_get_extended_agent_card(
        self, params: GetExtendedAgentCardRequest, context: ServerCallContext
    ) -> AgentCard:
        raise UnsupportedOperationError("This agent has no extended card: the public one is all.")


@contextlib.asynccontextmanager
async def watching(task_id: str, context: ServerCallContext) -> AsyncIterator[Waiter]:
    """Woken when an event of the task comes, and told of a revocation (approvals.waiters):
    subscribed before the first read, so nothing written after it goes unseen."""
    async with waiting("thread", task_id, context.state["credential"]) as waiter:
        yield waiter


async def cleared(waiter: Waiter, read: Awaitable[reads.Snapshot]) -> reads.Snapshot:
    """The task `read` gives, once the hub has cleared the caller's credential against the
    revocation counter read after it (access.clearance); else 401."""
    found = await read
    if not await waiter.admits(found.revocations):
        raise Denied(401, REVOKED)
    return found


async def settled(
    task_id: str, context: ServerCallContext, wakeup: Waiter, wait: float = SEND_WAIT
) -> None:
    """Wait until the task has ended or waits for someone, the caller has gone or been
    revoked, or `wait` seconds have passed."""
    deadline = time.monotonic() + wait
    gone = context.state.get("disconnected")
    while time.monotonic() < deadline and not wakeup.revoked:
        state = await blocking(reads.state_of)(task_id)
        if state in mapping.TERMINAL | mapping.INTERRUPTED:
            return
        if gone is not None and await gone():
            return
        await wakeup.wait(SAFETY_POLL)


async def updates(
    task_id: str, cursor: Cursor, wakeup: Waiter
) -> AsyncGenerator[TaskStatusUpdateEvent | TaskArtifactUpdateEvent]:
    """The task's updates after `cursor`, from the Event table, until, once at least one was
    sent, the task has ended or waits for someone; or until the caller's token is revoked.

    The fold starts from the task's first event whatever the cursor, so an update is the same
    in every stream: a stream resumed from a cursor sends exactly the updates after it.
    """
    fold = mapping.Fold(task_id)
    position = 0
    sent = False
    while True:
        events, more, revocations = await blocking(reads.read_events)(task_id, position)
        if events and not await wakeup.admits(revocations):
            return
        for event in events:
            made = fold.apply(event)
            for index, update in enumerate(made):
                at = Cursor(event.id) if index == len(made) - 1 else Cursor(event.id, index)
                if at <= cursor:
                    continue
                update.metadata.update({"eventId": str(at)})
                sent = True
                yield update
            position = event.id
        if more:
            continue
        if sent and fold.state in mapping.TERMINAL | mapping.INTERRUPTED:
            return
        if wakeup.revoked:
            return
        await wakeup.wait(SAFETY_POLL)
