"""A task over A2A, with the SDK's client: it asks, it is answered, it completes; a reply to an
agent that waits for input; a cancel; the list of what waits for a person."""

import json
from typing import Any

import pytest
from a2a.client.client import ClientCallContext
from a2a.types import (
    CancelTaskRequest,
    GetTaskRequest,
    ListTasksRequest,
    Role,
    SubscribeToTaskRequest,
    TaskNotCancelableError,
    TaskState,
)
from google.protobuf import json_format

from agents.models import Event, Suspension, Thread
from tests.a2a.conftest import Gateway, data_of, message, run, sent
from tests.conftest import ROOT, wait_for

pytestmark = [pytest.mark.worker]

INPUT_REQUIRED = TaskState.TASK_STATE_INPUT_REQUIRED
COMPLETED = TaskState.TASK_STATE_COMPLETED


def send(gateway: Gateway, msg: Any, who: str = "reviewer", **configuration: Any) -> Any:
    async def call() -> Any:
        async with gateway.client(who) as client:
            return await sent(client, msg, **configuration)

    return run(call())


def get(gateway: Gateway, task_id: str, **params: Any) -> Any:
    async def call() -> Any:
        async with gateway.client() as client:
            return await client.get_task(GetTaskRequest(id=task_id, **params))

    return run(call())


def list_tasks(gateway: Gateway, **params: Any) -> Any:
    async def call() -> Any:
        async with gateway.client() as client:
            return await client.list_tasks(ListTasksRequest(**params))

    return run(call())


def waiting(thread_id: str, status: str = Thread.Status.WAITING_INPUT) -> Thread:
    return wait_for(
        lambda: Thread.objects.filter(pk=thread_id, status=status).first(),
        what=f"thread {thread_id} to be {status}",
    )


class ConversationTestCase:
    def test_a_question_is_input_required_and_an_answer_completes_the_task(
        self, gateway: Gateway, users: dict[str, Any]
    ) -> None:
        task = send(gateway, message("Restart the web service", agent="helpdesk"))

        assert task.status.state == INPUT_REQUIRED
        text, data = task.status.message.parts
        assert text.text == "Which environment: staging or production?"
        [asked] = data_of(data)["suspensions"]
        s = Suspension.objects.get(thread_id=task.id)
        assert asked["suspension"] == str(s.pk)
        assert (asked["kind"], asked["tool"]) == ("input", "ask_user")
        assert asked["question"] == "Which environment: staging or production?"
        assert asked["expiresAt"] == s.expires_at.isoformat()
        assert task.status.message.metadata["awaiting"] == "answer"
        assert task.context_id == task.id
        assert task.metadata["agent"] == "helpdesk"

        done = send(gateway, message("staging", task_id=task.id))

        assert done.status.state == COMPLETED
        [artifact] = done.artifacts
        assert artifact.parts[0].text == "Thanks. I restarted the environment you named."
        assert [(m.role, m.parts[0].text) for m in done.history] == [
            (Role.ROLE_USER, "Restart the web service"),
            (Role.ROLE_AGENT, "Two environments match your request."),
            (Role.ROLE_USER, "staging"),
            (Role.ROLE_AGENT, "Thanks. I restarted the environment you named."),
        ]
        s.refresh_from_db()
        assert (s.status, s.response, s.decided_by) == ("approved", "staging", users["reviewer"])
        thread = Thread.objects.get(pk=task.id)
        assert (thread.status, thread.created_by) == ("completed", users["reviewer"])
        last = get(gateway, task.id, history_length=1)
        assert [m.parts[0].text for m in last.history] == [
            "Thanks. I restarted the environment you named."
        ]
        assert last.status.state == COMPLETED

    def test_a_reply_goes_to_the_agent_that_waits_for_input(self, gateway: Gateway) -> None:
        task = send(gateway, message("file the form", agent="desk"))

        assert task.status.state == INPUT_REQUIRED
        text, data = task.status.message.parts
        assert text.text == "Which form: A or B?"
        asked = data_of(data)["input"]
        assert (asked["types"], asked["maxChars"]) == (["text/plain"], 40)
        assert task.status.message.metadata["awaiting"] == "input"

        done = send(gateway, message("Form A", task_id=task.id))

        assert done.status.state == COMPLETED
        assert done.artifacts[0].parts[0].text == "All done."
        provided = Event.objects.get(thread_id=task.id, type=Event.Type.INPUT_PROVIDED)
        assert provided.payload["type"] == "text/plain"
        assert provided.actor_name == "alice"

    def test_json_input_goes_to_an_agent_that_takes_it(self, gateway: Gateway) -> None:
        task = send(gateway, message("the form", agent="formdesk"))
        assert task.status.state == INPUT_REQUIRED

        done = send(gateway, message(data={"name": "Ada", "age": 36}, task_id=task.id))

        assert done.status.state == COMPLETED
        said = Event.objects.get(thread_id=task.id, type=Event.Type.USER_MESSAGE)
        assert json.loads(said.payload["text"]) == {"name": "Ada", "age": 36}
        assert '"age": 36' in said.payload["text"]  # a whole number stays one
        provided = Event.objects.get(thread_id=task.id, type=Event.Type.INPUT_PROVIDED)
        assert provided.payload["type"] == "application/json"

    def test_a_task_is_cancelled_once(self, gateway: Gateway, users: dict[str, Any]) -> None:
        task = send(gateway, message("pay it", agent="payer"))
        assert task.status.state == INPUT_REQUIRED

        async def cancel_twice() -> tuple[Any, Exception]:
            async with gateway.client() as client:
                cancelled = await client.cancel_task(CancelTaskRequest(id=task.id))
                try:
                    await client.cancel_task(CancelTaskRequest(id=task.id))
                except TaskNotCancelableError as e:
                    return cancelled, e
            raise AssertionError("a second cancel was accepted")

        cancelled, refused = run(cancel_twice())

        assert cancelled.status.state == TaskState.TASK_STATE_CANCELED
        assert "already ended" in str(refused)
        thread = Thread.objects.get(pk=task.id)
        assert thread.status == Thread.Status.CANCELLED
        assert Suspension.objects.get(thread=thread).status == Suspension.Status.CANCELLED
        [event] = Event.objects.filter(thread=thread, type=Event.Type.THREAD_CANCELLED)
        assert event.actor == users["reviewer"]

    def test_input_required_lists_what_waits_for_a_person_a_page_at_a_time(
        self, gateway: Gateway
    ) -> None:
        asking = [send(gateway, message("restart", agent="helpdesk")).id for _ in range(2)]
        approving = send(gateway, message("pay", agent="payer")).id
        replying = send(gateway, message("file", agent="desk")).id
        answered = send(gateway, message("restart", agent="helpdesk")).id
        send(gateway, message("production", task_id=answered))
        expected = {*asking, approving, replying}

        seen: list[str] = []
        token = ""
        pages = 0
        while True:
            page = list_tasks(gateway, status=INPUT_REQUIRED, page_size=3, page_token=token)
            pages += 1
            assert page.total_size == 4
            assert all(t.status.state == INPUT_REQUIRED for t in page.tasks)
            assert all(not t.artifacts for t in page.tasks)
            seen += [t.id for t in page.tasks]
            token = page.next_page_token
            if not token:
                break
        assert pages == 2
        assert len(seen) == len(set(seen)) and set(seen) == expected
        # What the inbox shows: the threads with a pending suspension or waiting for a reply.
        waits = set(
            Suspension.objects.filter(status="pending").values_list("thread_id", flat=True)
        ) | set(Thread.objects.filter(status="waiting_input").values_list("pk", flat=True))
        assert {str(pk) for pk in waits} == expected

        # Most recently updated first.
        listed = list_tasks(gateway, status=INPUT_REQUIRED)
        stamps = [t.status.timestamp.ToDatetime() for t in listed.tasks]
        assert stamps == sorted(stamps, reverse=True)

        completed = list_tasks(gateway, status=COMPLETED, include_artifacts=True)
        assert [t.id for t in completed.tasks] == [answered]
        assert completed.tasks[0].artifacts[0].parts[0].text.startswith("Thanks.")
        assert list_tasks(gateway, status=TaskState.TASK_STATE_WORKING).total_size == 0
        one = list_tasks(gateway, context_id=approving)
        assert [t.id for t in one.tasks] == [approving]

        raw = gateway.rpc("tasks/getInputRequired", {"pageSize": 10}).json()["result"]
        assert {t["id"] for t in raw["tasks"]} == expected
        assert raw["nextPageToken"] == ""

    def test_an_agent_instance_waiting_for_approval_makes_its_task_input_required(
        self, gateway: Gateway, load_agents: Any
    ) -> None:
        load_agents((ROOT / "demo" / "agents.yaml").read_text())

        task = send(gateway, message("Morning briefing", agent="briefing"))

        # One researcher instance waits for a reviewer: that wait is the task's, while the
        # thread's other instances run on and once they have finished (the run is then
        # suspended: nothing of it works, agents.run_status).
        assert task.status.state == INPUT_REQUIRED
        wait_for(
            lambda: Thread.objects.get(pk=task.id).status == Thread.Status.SUSPENDED,
            timeout=30,
            what="the run to be suspended once its other instances finished",
        )
        assert get(gateway, task.id).status.state == INPUT_REQUIRED
        [waits] = data_of(task.status.message.parts[1])["suspensions"]
        assert (waits["agent"], waits["tool"]) == ("researcher", "displayConfirmation")
        s = Suspension.objects.get(thread_id=task.id, status="pending")
        assert s.frame.instance > 0 and waits["suspension"] == str(s.pk)
        listed = list_tasks(gateway, status=INPUT_REQUIRED)
        assert [t.id for t in listed.tasks] == [task.id]

        # The state its events add up to, replayed from the first, is the one GetTask shows.
        async def replay() -> list[Any]:
            async with gateway.client(streaming=True) as client:
                since_first = ClientCallContext(service_parameters={"Last-Event-ID": "0"})
                request = SubscribeToTaskRequest(id=task.id)
                return [r async for r in client.subscribe(request, context=since_first)]

        streamed = run(replay())[-1].status_update.status
        fresh = get(gateway, task.id).status
        assert json_format.MessageToDict(streamed.message) == json_format.MessageToDict(
            fresh.message
        )
        assert streamed.state == fresh.state == INPUT_REQUIRED
