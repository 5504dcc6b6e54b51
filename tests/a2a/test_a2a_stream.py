"""Streams: SendStreamingMessage and SubscribeToTask, from the Event table. A stream dropped
and resumed from its cursor (Last-Event-ID) misses nothing and repeats nothing."""

import asyncio
from typing import Any

import pytest
from a2a.client.client import ClientCallContext
from a2a.types import (
    SendMessageRequest,
    StreamResponse,
    SubscribeToTaskRequest,
    TaskState,
    UnsupportedOperationError,
)
from django.contrib.auth.models import User
from django.utils import timezone
from google.protobuf import json_format

from access import tokens
from access.models import ApiToken
from agents import decisions, events
from agents.models import Event, Suspension, Thread
from tests.a2a.conftest import Gateway, data_of, db, message, run, sent
from tests.conftest import wait_for

pytestmark = [pytest.mark.worker]

WORKING = TaskState.TASK_STATE_WORKING
INPUT_REQUIRED = TaskState.TASK_STATE_INPUT_REQUIRED


# What the stepper's updates say, in order (tests/a2a/conftest.py): two steps, the third with
# its request, then the wait for its approval.
STEPS = [
    "Step one.",
    "Step two.",
    "Step three; publishing needs an approval.",
    "stepper waits for approval to call displayConfirmation.",
]


def said(r: StreamResponse) -> str:
    if not r.HasField("status_update") or not r.status_update.status.message.parts:
        return ""
    return r.status_update.status.message.parts[0].text


def updates(responses: list[StreamResponse]) -> list[tuple[str, dict[str, Any]]]:
    """Each update after the first answer (the task), by its cursor, as JSON."""
    found = []
    for r in responses[1:]:
        update = r.status_update if r.HasField("status_update") else r.artifact_update
        found.append((update.metadata["eventId"], json_format.MessageToDict(r)))
    return found


def event_of(cursor: str) -> int:
    return int(cursor.split("-")[0])


def since(cursor: str) -> ClientCallContext:
    return ClientCallContext(service_parameters={"Last-Event-ID": cursor})


class StreamTestCase:
    def test_a_dropped_stream_resumes_from_its_cursor_missing_and_repeating_nothing(
        self, gateway: Gateway, users: dict[str, Any]
    ) -> None:
        async def scenario() -> tuple[list, list, list]:
            async with gateway.client(streaming=True) as client:
                first: list[StreamResponse] = []
                stream = client.send_message(
                    SendMessageRequest(message=message("publish", agent="stepper"))
                )
                async for r in stream:
                    first.append(r)
                    if said(r):
                        break
                await stream.aclose()  # the connection is dropped here
                task_id = first[0].task.id
                # The first answer is the task as it is when the stream starts: a busy machine's
                # worker may have said step one by then, so the first update is then step two.
                # Dropped after a later one, the resumed stream would have nothing left to send
                # before the approval, and would wait for it.
                assert said(first[-1]) in STEPS[:2], [said(r) for r in first]

                # The task goes on while nobody listens, to its approval.
                await db(
                    lambda: wait_for(
                        lambda: Suspension.objects.filter(thread_id=task_id).exists(),
                        what="the approval",
                    )
                )
                cursor = first[-1].status_update.metadata["eventId"]
                request = SubscribeToTaskRequest(id=task_id)
                second = [r async for r in client.subscribe(request, context=since(cursor))]
                whole = [r async for r in client.subscribe(request, context=since("0"))]
                return first, second, whole

        first, second, whole = run(scenario())

        assert first[0].task.status.state == WORKING
        # One step said in the first stream, and every later one in the second, in order.
        told = [said(r) for r in first[1:]] + [said(r) for r in second[1:]]
        assert told == STEPS[STEPS.index(said(first[-1])) :]
        assert [said(r) for r in first[1:]] == [said(first[-1])]
        assert second[0].HasField("task") and whole[0].HasField("task")
        resumed = updates(first) + updates(second)
        start = int(first[0].task.metadata["eventId"])  # what the first answer showed
        replayed = [u for u in updates(whole) if event_of(u[0]) > start]
        assert resumed == replayed  # nothing missed, nothing repeated
        cursors = [c for c, _ in resumed]
        event_ids = [event_of(c) for c in cursors]
        assert len(set(cursors)) == len(cursors) and event_ids == sorted(event_ids)
        task_id = first[0].task.id
        assert set(event_ids) <= set(
            Event.objects.filter(thread_id=task_id).values_list("id", flat=True)
        )
        last = second[-1].status_update.status
        assert last.state == INPUT_REQUIRED
        [waits] = data_of(last.message.parts[1])["suspensions"]
        assert waits["tool"] == "displayConfirmation"
        assert waits["arguments"] == {"action": "Publish the notes"}
        # The state the updates add up to is the task's, as a fresh GetTask tells it.
        fresh = gateway.rpc("GetTask", {"id": task_id}).json()["result"]["status"]
        streamed = json_format.MessageToDict(last)
        assert fresh["state"] == streamed["state"] == "TASK_STATE_INPUT_REQUIRED"
        assert fresh["message"] == streamed["message"]

        # Subscribed without a cursor: the task now, then what happens next, to the end.
        s = Suspension.objects.get(thread_id=task_id)

        async def to_the_end() -> list[StreamResponse]:
            async with gateway.client(streaming=True) as client:
                stream = client.subscribe(SubscribeToTaskRequest(id=task_id))
                got = [await anext(stream)]
                await db(lambda: decisions.decide(s, users["teammate"], {"approved": True}))
                got += [r async for r in stream]
                return got

        final = run(to_the_end())
        assert final[0].task.status.state == INPUT_REQUIRED
        kinds = [r.WhichOneof("payload") for r in final[1:]]
        assert kinds[-2:] == ["artifact_update", "status_update"]
        assert final[-2].artifact_update.artifact.parts[0].text == "Published."
        assert final[-1].status_update.status.state == TaskState.TASK_STATE_COMPLETED
        assert "Published." in [said(r) for r in final]
        assert Thread.objects.get(pk=task_id).status == Thread.Status.COMPLETED

    def test_a_task_that_has_ended_takes_no_subscription(self, gateway: Gateway) -> None:
        async def scenario() -> Exception:
            async with gateway.client() as client:
                task = await sent(client, message("restart", agent="helpdesk"))
                await sent(client, message("staging", task_id=task.id))
            async with gateway.client(streaming=True) as client:
                try:
                    async for _ in client.subscribe(SubscribeToTaskRequest(id=task.id)):
                        pass
                except UnsupportedOperationError as e:
                    return e
            raise AssertionError("an ended task was subscribed to")

        refused = run(scenario())
        assert "has ended" in str(refused)

    def test_streams_of_two_clients_see_the_same_updates(self, gateway: Gateway) -> None:
        async def scenario() -> tuple[list, list]:
            async with (
                gateway.client(streaming=True) as one,
                gateway.client("teammate", streaming=True) as two,
            ):
                stream = one.send_message(
                    SendMessageRequest(message=message("publish", agent="stepper"))
                )
                head = await anext(stream)
                task_id = head.task.id
                watcher = asyncio.create_task(
                    collect(two.subscribe(SubscribeToTaskRequest(id=task_id), context=since("0")))
                )
                mine = [head] + [r async for r in stream]
                return mine, await watcher

        mine, theirs = run(scenario())
        assert mine[-1].status_update.status.state == INPUT_REQUIRED
        assert updates(mine) == updates(theirs)[-len(updates(mine)) :]

    @pytest.mark.parametrize("how", ["revoked", "expired", "deleted"])
    def test_a_stream_ends_when_its_token_is_revoked_expires_or_is_deleted(
        self, gateway: Gateway, how: str
    ) -> None:
        token = ApiToken.objects.get(user__username="alice")

        def end(task_id: str) -> int:
            """Revoke or expire the token; the task's last event id then."""
            if how == "revoked":
                tokens.revoke(token)
            elif how == "deleted":
                ApiToken.objects.filter(pk=token.pk).delete()
            else:
                ApiToken.objects.filter(pk=token.pk).update(expires_at=timezone.now())
            return Event.objects.filter(thread_id=task_id).order_by("-id").first().id

        async def scenario() -> tuple[StreamResponse, float]:
            async with gateway.client() as client:
                task = await sent(client, message("pay", agent="payer"))
            async with gateway.client(streaming=True) as client:
                stream = client.subscribe(SubscribeToTaskRequest(id=task.id))
                head = await anext(stream)
                last = await db(lambda: end(task.id))
                started = asyncio.get_running_loop().time()
                # Ends: the hub checks the token, then says so. Bounded well past the check
                # interval, so a stream that never ends fails here, not at the suite's timeout.
                async with asyncio.timeout(60):
                    rest = [r async for r in stream]
                # Nothing after the revocation; on a loaded machine the stream may still be
                # catching up to the task's head (events not yet settled when it was read).
                assert all(event_of(cursor) <= last for cursor, _ in updates([head, *rest]))
                return head, asyncio.get_running_loop().time() - started

        head, took = run(scenario())
        assert head.task.status.state == INPUT_REQUIRED
        assert took < 10  # access.revocation: within a check interval (5 s)
        r = gateway.rpc("GetTask", {"id": head.task.id})
        assert r.status_code == 401
        if how != "deleted":
            assert ApiToken.objects.filter(pk=token.pk).exists()  # the row stays, for the trail
            assert how in r.json()["error"]["message"]

    @pytest.mark.parametrize("how", ["revoked", "deactivated"])
    def test_it_sends_nothing_recorded_after_the_revocation(
        self, gateway: Gateway, how: str
    ) -> None:
        token = ApiToken.objects.get(user__username="alice")

        def end_then_speak(task_id: str) -> int:
            """Revoke the token, or deactivate its user with no signal sent (a queryset
            update), then record an event of the task; the task's last event id before."""
            last = Event.objects.filter(thread_id=task_id).order_by("-id").first().id
            if how == "revoked":
                tokens.revoke(token)
            else:
                User.objects.filter(username="alice").update(is_active=False)
            events.record(
                Event.Type.AGENT_MESSAGE,
                thread_id=task_id,
                payload={"frame": "agent:payer", "text": "Said after the revocation."},
            )
            return last

        async def scenario() -> tuple[int, list[StreamResponse]]:
            async with gateway.client() as client:
                task = await sent(client, message("pay", agent="payer"))
            async with gateway.client(streaming=True) as client:
                stream = client.subscribe(SubscribeToTaskRequest(id=task.id))
                head = await anext(stream)
                last = await db(lambda: end_then_speak(task.id))
                async with asyncio.timeout(60):  # a stream that never ends fails here
                    rest = [r async for r in stream]
                return last, [head, *rest]

        last, responses = run(scenario())
        assert [cursor for cursor, _ in updates(responses) if event_of(cursor) > last] == []
        assert "Said after the revocation." not in [said(r) for r in responses]


async def collect(stream: Any) -> list[StreamResponse]:
    return [r async for r in stream]
