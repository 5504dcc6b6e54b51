"""A2A 0.3: its method names and shapes, with no A2A-Version header (raw JSON-RPC) and through
the SDK's 0.3 compatibility transport; the seed's tasks/provideInputAndContinue and
tasks/getInputRequired."""

import json
from typing import Any

import httpx
import pytest
from a2a.types import (
    CancelTaskRequest,
    DeleteTaskPushNotificationConfigRequest,
    GetTaskPushNotificationConfigRequest,
    GetTaskRequest,
    ListTaskPushNotificationConfigsRequest,
    SendMessageRequest,
    SubscribeToTaskRequest,
    TaskPushNotificationConfig,
    TaskState,
)

from a2a_server.models import PushNotificationConfig
from agents.models import Suspension, Thread
from tests.a2a.conftest import HOOK, Gateway, message, run, sent

pytestmark = [pytest.mark.worker]


def user_message(text: str, task_id: str = "", agent: str = "") -> dict[str, Any]:
    """A 0.3 message: `kind` on the message and on each part, lowercase roles."""
    msg: dict[str, Any] = {
        "kind": "message",
        "messageId": f"m-{text[:8]}",
        "role": "user",
        "parts": [{"kind": "text", "text": text}],
    }
    if task_id:
        msg["taskId"] = task_id
    if agent:
        msg["metadata"] = {"agent": agent}
    return msg


def result(r: httpx.Response) -> Any:
    assert r.status_code == 200, r.text
    body = r.json()
    assert "error" not in body, body
    return body["result"]


class RawV03TestCase:
    def test_the_03_names_work_without_a_version_header(self, gateway: Gateway) -> None:
        def call(method: str, params: Any) -> Any:
            return result(gateway.rpc(method, params, version=None))

        task = call("message/send", {"message": user_message("restart", agent="helpdesk")})
        assert task["kind"] == "task"
        assert task["status"]["state"] == "input-required"
        text, data = task["status"]["message"]["parts"]
        assert (text["kind"], text["text"]) == ("text", "Which environment: staging or production?")
        assert data["kind"] == "data"
        assert data["data"]["suspensions"][0]["tool"] == "ask_user"

        got = call("tasks/get", {"id": task["id"], "historyLength": 1})
        assert got["status"]["state"] == "input-required"
        assert [m["role"] for m in got["history"]] == ["agent"]

        waiting = call("tasks/getInputRequired", {})
        assert [t["id"] for t in waiting["tasks"]] == [task["id"]]
        assert waiting["tasks"][0]["kind"] == "task"
        assert waiting["tasks"][0]["status"]["state"] == "input-required"

        done = call(
            "tasks/provideInputAndContinue",
            {"taskId": task["id"], "input": user_message("staging"), "metadata": {"via": "seed"}},
        )
        assert done["status"]["state"] == "completed"
        assert done["artifacts"][0]["parts"][0]["text"].startswith("Thanks.")
        assert Suspension.objects.get(thread_id=task["id"]).response == "staging"
        assert call("tasks/getInputRequired", {})["tasks"] == []

        other = call(
            "message/send",
            {
                "message": user_message("pay", agent="payer"),
                "configuration": {"blocking": False},
            },
        )
        cancelled = call("tasks/cancel", {"id": other["id"]})
        assert cancelled["status"]["state"] == "canceled"
        assert Thread.objects.get(pk=other["id"]).status == Thread.Status.CANCELLED

        config = call(
            "tasks/pushNotificationConfig/set",
            {
                "taskId": task["id"],
                "pushNotificationConfig": {
                    "id": "hook",
                    "url": HOOK,
                    "token": "t-1",
                    "authentication": {"schemes": ["Bearer"], "credentials": "secret"},
                },
            },
        )
        assert config["pushNotificationConfig"]["url"] == HOOK
        stored = PushNotificationConfig.objects.get(thread_id=task["id"])
        assert stored.authentication == {"scheme": "Bearer", "credentials": "secret"}
        listed = call("tasks/pushNotificationConfig/list", {"id": task["id"]})
        assert [c["pushNotificationConfig"]["id"] for c in listed] == ["hook"]
        assert (
            call(
                "tasks/pushNotificationConfig/get",
                {"id": task["id"], "pushNotificationConfigId": "hook"},
            )["pushNotificationConfig"]["token"]
            == "t-1"
        )
        gone = {"id": task["id"], "pushNotificationConfigId": "hook"}
        assert call("tasks/pushNotificationConfig/delete", gone) is None
        assert not PushNotificationConfig.objects.exists()

    def test_message_stream_answers_server_sent_events_in_03_shapes(self, gateway: Gateway) -> None:
        body = {
            "jsonrpc": "2.0",
            "id": "s-1",
            "method": "message/stream",
            "params": {"message": user_message("publish", agent="stepper")},
        }
        events = []
        with httpx.stream(
            "POST",
            f"{gateway.url}/a2a",
            json=body,
            headers=gateway.headers("reviewer", None),
            timeout=60,
        ) as r:
            assert r.headers["content-type"].startswith("text/event-stream")
            current: dict[str, str] = {}
            for line in r.iter_lines():
                if not line:
                    if "data" in current:
                        events.append(current)
                    current = {}
                elif not line.startswith(":"):
                    key, _, value = line.partition(": ")
                    current[key] = value
        answers = [json.loads(e["data"]) for e in events]
        assert all(a["id"] == "s-1" and a["jsonrpc"] == "2.0" for a in answers)
        kinds = [a["result"]["kind"] for a in answers]
        assert kinds[0] == "task" and set(kinds[1:]) == {"status-update"}
        assert answers[-1]["result"]["status"]["state"] == "input-required"
        ids = [int(e["id"].split("-")[0]) for e in events]
        assert ids == sorted(ids) and len(set(e["id"] for e in events)) == len(events)
        assert [e["id"] for e in events[1:]] == [
            a["result"]["metadata"]["eventId"] for a in answers[1:]
        ]


class CompatTransportTestCase:
    def test_the_sdks_03_transport_sends_gets_answers_cancels_and_resubscribes(
        self, gateway: Gateway
    ) -> None:
        async def scenario() -> dict[str, Any]:
            found: dict[str, Any] = {}
            async with gateway.client(version="0.3") as client:
                task = await sent(client, message("restart", agent="helpdesk"))
                found["asked"] = task
                found["got"] = await client.get_task(GetTaskRequest(id=task.id))
                found["done"] = await sent(client, message("staging", task_id=task.id))
                other = await sent(client, message("pay", agent="payer"))
                found["cancelled"] = await client.cancel_task(CancelTaskRequest(id=other.id))
                config = TaskPushNotificationConfig(task_id=task.id, id="hook", url=HOOK, token="t")
                found["set"] = await client.create_task_push_notification_config(config)
                found["get"] = await client.get_task_push_notification_config(
                    GetTaskPushNotificationConfigRequest(task_id=task.id, id="hook")
                )
                found["list"] = await client.list_task_push_notification_configs(
                    ListTaskPushNotificationConfigsRequest(task_id=task.id)
                )
                await client.delete_task_push_notification_config(
                    DeleteTaskPushNotificationConfigRequest(task_id=task.id, id="hook")
                )
            async with gateway.client(version="0.3", streaming=True) as client:
                stream = client.send_message(
                    SendMessageRequest(message=message("publish", agent="stepper"))
                )
                first = [r async for r in stream]
                task_id = first[0].task.id
                found["streamed"] = first
                resubscribed = client.subscribe(SubscribeToTaskRequest(id=task_id))
                found["resubscribed"] = await anext(resubscribed)
                await resubscribed.aclose()
            return found

        found = run(scenario())
        asked = found["asked"]
        assert asked.status.state == TaskState.TASK_STATE_INPUT_REQUIRED
        assert asked.status.message.parts[0].text == "Which environment: staging or production?"
        assert found["got"].id == asked.id
        assert found["done"].status.state == TaskState.TASK_STATE_COMPLETED
        assert found["done"].artifacts[0].parts[0].text.startswith("Thanks.")
        assert found["cancelled"].status.state == TaskState.TASK_STATE_CANCELED
        assert found["set"].url == found["get"].url == HOOK
        assert [c.id for c in found["list"].configs] == ["hook"]
        assert not PushNotificationConfig.objects.exists()
        streamed = found["streamed"]
        assert streamed[0].HasField("task")
        assert streamed[-1].status_update.status.state == TaskState.TASK_STATE_INPUT_REQUIRED
        # Resubscribed while it waits: the task now first, as the specification has it.
        assert found["resubscribed"].task.id == streamed[0].task.id
