"""Push notification configs over A2A 1.0: stored per task and checked; get, list, delete."""

from typing import Any

import pytest
from a2a.types import (
    AuthenticationInfo,
    DeleteTaskPushNotificationConfigRequest,
    GetTaskPushNotificationConfigRequest,
    InvalidParamsError,
    ListTaskPushNotificationConfigsRequest,
    SendMessageRequest,
    TaskNotFoundError,
    TaskPushNotificationConfig,
)
from django.contrib.auth.models import Permission, User

from a2a_server.models import PushNotificationConfig
from agents.models import Event
from tests.a2a.conftest import HOOK, Gateway, message, run, sent

pytestmark = [pytest.mark.worker]


def config(task_id: str, config_id: str = "", url: str = HOOK) -> Any:
    return TaskPushNotificationConfig(task_id=task_id, id=config_id, url=url, token="t-1")


class PushConfigsTestCase:
    def test_configs_are_stored_per_task_listed_a_page_at_a_time_and_deleted_once(
        self, gateway: Gateway, users: dict[str, Any]
    ) -> None:
        async def scenario() -> dict[str, Any]:
            found: dict[str, Any] = {}
            async with gateway.client() as client:
                task = await sent(client, message("restart", agent="helpdesk"))
                found["task"] = task.id
                first = config(task.id, "first")
                first.authentication.CopyFrom(
                    AuthenticationInfo(scheme="Bearer", credentials="s3cret")
                )
                found["created"] = await client.create_task_push_notification_config(first)
                found["unnamed"] = await client.create_task_push_notification_config(
                    config(task.id, url=HOOK + "/unnamed")
                )
                replaced = config(task.id, "first", url=HOOK + "/v2")
                found["replaced"] = await client.create_task_push_notification_config(replaced)
                found["got"] = await client.get_task_push_notification_config(
                    GetTaskPushNotificationConfigRequest(task_id=task.id, id="first")
                )
                page = await client.list_task_push_notification_configs(
                    ListTaskPushNotificationConfigsRequest(task_id=task.id, page_size=1)
                )
                rest = await client.list_task_push_notification_configs(
                    ListTaskPushNotificationConfigsRequest(
                        task_id=task.id, page_size=1, page_token=page.next_page_token
                    )
                )
                found["pages"] = (page, rest)
                delete = DeleteTaskPushNotificationConfigRequest(task_id=task.id, id="first")
                await client.delete_task_push_notification_config(delete)
                await client.delete_task_push_notification_config(delete)  # idempotent
                try:
                    await client.get_task_push_notification_config(
                        GetTaskPushNotificationConfigRequest(task_id=task.id, id="first")
                    )
                except TaskNotFoundError as e:
                    found["gone"] = e
            return found

        found = run(scenario())
        assert found["created"].url == HOOK
        assert found["created"].authentication.scheme == "Bearer"
        assert found["unnamed"].id  # the server named it
        assert found["replaced"].url == found["got"].url == HOOK + "/v2"
        page, rest = found["pages"]
        assert len(page.configs) == 1 and page.next_page_token
        assert len(rest.configs) == 1 and rest.next_page_token == ""
        assert {page.configs[0].id, rest.configs[0].id} == {"first", found["unnamed"].id}
        assert "gone" in found
        [left] = PushNotificationConfig.objects.filter(thread_id=found["task"])
        assert (left.url, left.created_by) == (HOOK + "/unnamed", users["reviewer"])
        # Each change is in the audit trail, with who made it and no secret.
        trail = Event.objects.filter(thread_id=found["task"], type__startswith="A2A_PUSH_CONFIG")
        assert [(e.type, e.payload["config"]) for e in trail.order_by("id")] == [
            ("A2A_PUSH_CONFIG_SET", "first"),
            ("A2A_PUSH_CONFIG_SET", found["unnamed"].id),
            ("A2A_PUSH_CONFIG_SET", "first"),
            ("A2A_PUSH_CONFIG_DELETED", "first"),
        ]
        assert trail.first().payload["authentication"] == "Bearer"
        assert all(e.actor == users["reviewer"] for e in trail)
        assert "s3cret" not in str([e.payload for e in trail])

    def test_a_config_needs_an_http_url_and_a_known_task(self, gateway: Gateway) -> None:
        async def scenario() -> list[Exception]:
            refused = []
            async with gateway.client() as client:
                task = await sent(client, message("restart", agent="helpdesk"))
                for bad in [
                    config(task.id, url="ftp://files.example.com/x"),
                    config(task.id, url="javascript:alert(1)"),
                    config(task.id, url="/relative"),
                    config(task.id, url="https://nowhere.invalid/hook"),
                    config(task.id, "x" * 201),
                    config("6a1c2f38-8d3e-4c4b-9a5f-0b8b1e2f3a4c"),
                ]:
                    try:
                        await client.create_task_push_notification_config(bad)
                    except (InvalidParamsError, TaskNotFoundError) as e:
                        refused.append(e)
                try:
                    await client.list_task_push_notification_configs(
                        ListTaskPushNotificationConfigsRequest(task_id="not-a-task")
                    )
                except TaskNotFoundError as e:
                    refused.append(e)
            return refused

        refused = run(scenario())
        kinds = [type(e).__name__ for e in refused]
        assert kinds == ["InvalidParamsError"] * 5 + ["TaskNotFoundError"] * 2
        assert "does not resolve" in str(refused[3])
        assert not PushNotificationConfig.objects.exists()

    def test_a_message_can_bring_its_task_a_config(self, gateway: Gateway) -> None:
        async def scenario() -> str:
            async with gateway.client() as client:
                request = SendMessageRequest(message=message("restart", agent="helpdesk"))
                request.configuration.task_push_notification_config.CopyFrom(
                    TaskPushNotificationConfig(url=HOOK + "/new", token="n")
                )
                async for response in client.send_message(request):
                    return response.task.id
            raise AssertionError("no answer")

        task_id = run(scenario())
        [stored] = PushNotificationConfig.objects.filter(thread_id=task_id)
        assert (stored.url, stored.token) == (HOOK + "/new", "n")

    def test_only_its_creator_or_someone_who_may_cancel_deletes_a_config(
        self, gateway: Gateway, users: dict[str, Any]
    ) -> None:
        viewer = User.objects.create_user("vera")
        viewer.user_permissions.add(Permission.objects.get(codename="view_thread"))
        users["viewer"] = viewer
        gateway.tokens["viewer"] = gateway.token_for(viewer)
        task_id = gateway.rpc(
            "SendMessage",
            {
                "message": {
                    "messageId": "m",
                    "role": "ROLE_USER",
                    "parts": [{"text": "go"}],
                    "metadata": {"agent": "helpdesk"},
                }
            },
        ).json()["result"]["task"]["id"]
        made = {"taskId": task_id, "id": "mine", "url": HOOK}
        assert gateway.rpc("CreateTaskPushNotificationConfig", made).status_code == 200

        gone = {"taskId": task_id, "id": "mine"}
        refused = gateway.rpc("DeleteTaskPushNotificationConfig", gone, who="viewer")
        assert refused.status_code == 403
        assert PushNotificationConfig.objects.filter(config_id="mine").exists()
        seen = gateway.rpc("GetTaskPushNotificationConfig", gone, who="viewer")
        assert seen.json()["result"]["url"] == HOOK
        deleted = gateway.rpc("DeleteTaskPushNotificationConfig", gone, who="teammate")
        assert deleted.json() == {"jsonrpc": "2.0", "id": 1, "result": None}
        assert not PushNotificationConfig.objects.exists()
