"""Refusals: each with the specification's JSON-RPC error, and nothing changed by it."""

import json
from collections.abc import Iterator
from typing import Any

import httpx
import pytest
from a2a.client import A2AClientError

from agents.models import Event, Suspension, Thread
from tests.a2a.conftest import HOOK, Gateway, message, run, sent
from tests.conftest import wait_for

pytestmark = [pytest.mark.worker]


def send_params(task_id: str = "", **part: Any) -> dict[str, Any]:
    msg: dict[str, Any] = {"messageId": "m1", "role": "ROLE_USER", "parts": [part]}
    if task_id:
        msg["taskId"] = task_id
    return {"message": msg}


def error_of(r: httpx.Response, status: int = 200) -> dict[str, Any]:
    assert r.status_code == status, r.text
    body = r.json()
    assert body["jsonrpc"] == "2.0" and "result" not in body
    return body["error"]


@pytest.fixture
def unchanged(db: Any) -> Iterator[Any]:
    """Call it with a thread id after a refusal: no event was written, the thread is as it was."""
    before: dict[str, Any] = {}

    def snapshot(thread_id: str) -> tuple[int, str, list[str]]:
        thread = Thread.objects.get(pk=thread_id)
        statuses = list(
            Suspension.objects.filter(thread=thread).order_by("id").values_list("status", flat=True)
        )
        return Event.objects.count(), thread.status, statuses

    def check(thread_id: str | None = None, take: bool = False) -> None:
        if take:
            before[thread_id or ""] = snapshot(thread_id) if thread_id else Event.objects.count()
            return
        if thread_id is None:
            assert Event.objects.count() == before[""]
        else:
            assert snapshot(thread_id) == before[thread_id]

    yield check


def task_in(gateway: Gateway, agent: str, status: str) -> str:
    params = send_params(text="go")
    params["message"]["metadata"] = {"agent": agent}
    r = gateway.rpc("SendMessage", {**params, "configuration": {"returnImmediately": True}})
    task_id = r.json()["result"]["task"]["id"]
    wait_for(
        lambda: Thread.objects.filter(pk=task_id, status=status).exists(),
        what=f"the {agent} task to be {status}",
    )
    return task_id


class AuthenticationTestCase:
    def test_an_anonymous_call_is_told_to_authenticate_and_nothing_happens(
        self, gateway: Gateway, unchanged: Any
    ) -> None:
        unchanged(take=True)
        r = gateway.rpc("SendMessage", send_params(text="go"), who=None, request_id="a-1")
        error = error_of(r, 401)
        assert r.headers["WWW-Authenticate"].startswith("Bearer")
        assert error["code"] == -31401
        assert error["data"][0]["reason"] == "UNAUTHENTICATED"
        assert r.json()["id"] == "a-1"
        bad = httpx.post(
            f"{gateway.url}/a2a",
            json={"jsonrpc": "2.0", "id": 2, "method": "GetTask", "params": {"id": "x"}},
            headers={"Authorization": "Bearer not-a-token", "A2A-Version": "1.0"},
        )
        assert error_of(bad, 401)["code"] == -31401
        old = gateway.rpc("message/send", {}, who=None, version=None)  # 0.3: data as is
        assert error_of(old, 401)["data"] == {"reason": "UNAUTHENTICATED"}
        assert Thread.objects.count() == 0
        unchanged()

        async def with_the_sdk() -> Exception:
            async with httpx.AsyncClient() as http:
                from a2a.client import A2ACardResolver, ClientConfig, ClientFactory

                card = await A2ACardResolver(http, gateway.url).get_agent_card()
                client = ClientFactory(ClientConfig(httpx_client=http, streaming=False)).create(
                    card
                )
                try:
                    await sent(client, message("go", agent="helpdesk"))
                except A2AClientError as e:
                    return e
            raise AssertionError("an anonymous message was taken")

        assert "401" in str(run(with_the_sdk()))
        unchanged()

    def test_a_caller_without_permission_is_refused_403(
        self, gateway: Gateway, unchanged: Any
    ) -> None:
        task_id = task_in(gateway, "payer", Thread.Status.SUSPENDED)
        unchanged(task_id, take=True)
        for method, params in [
            ("GetTask", {"id": task_id}),
            ("SendMessage", send_params(text="go")),
            ("CancelTask", {"id": task_id}),
            ("ListTasks", {}),
        ]:
            error = error_of(gateway.rpc(method, params, who="outsider"), 403)
            assert error["code"] == -31403, method
            assert error["data"][0]["reason"] == "PERMISSION_DENIED"
        unchanged(task_id)


class RefusalsTestCase:
    def test_malformed_json_rpc_is_refused_with_its_code(
        self, gateway: Gateway, unchanged: Any
    ) -> None:
        unchanged(take=True)
        assert error_of(gateway.rpc("", body="{not json"))["code"] == -32700
        # NaN and Infinity are not JSON (Python's json takes them): refused as the REST API does.
        for number in ("NaN", "Infinity", "-Infinity", "1e400"):
            data = '{"kind": "data", "data": {"amount": ' + number + "}}"
            nan = (
                '{"jsonrpc": "2.0", "id": 1, "method": "SendMessage", "params": {"message": '
                '{"messageId": "m1", "role": "ROLE_USER", "parts": [' + data + "]}}}"
            )
            assert error_of(gateway.rpc("", body=nan))["code"] == -32700, number
        assert error_of(gateway.rpc("", body="[]"))["code"] == -32600  # a batch
        no_version = json.dumps({"id": 1, "method": "GetTask", "params": {}})
        assert error_of(gateway.rpc("", body=no_version))["code"] == -32600
        bad_id = json.dumps({"jsonrpc": "2.0", "id": True, "method": "GetTask"})
        assert error_of(gateway.rpc("", body=bad_id))["code"] == -32600
        assert error_of(gateway.rpc("GetTask", [1, 2]))["code"] == -32602
        assert error_of(gateway.rpc("GetTask", {"id": {"no": "string"}}))["code"] == -32602
        assert error_of(gateway.rpc("tasks/nothing", {}))["code"] == -32601
        assert error_of(gateway.rpc("TasksEverywhere", {}))["code"] == -32601
        nul = send_params(text="a\u0000b")
        assert error_of(gateway.rpc("SendMessage", nul))["code"] == -32602
        huge = "x" * (3 * 1024 * 1024)
        assert error_of(gateway.rpc("", body=huge), 413)["code"] == -32600
        assert httpx.get(f"{gateway.url}/a2a").status_code == 405
        assert Thread.objects.count() == 0
        unchanged()

    def test_versions_pick_the_method_names(self, gateway: Gateway, unchanged: Any) -> None:
        unchanged(take=True)
        no_header = gateway.rpc("SendMessage", send_params(text="go"), version=None)
        assert error_of(no_header)["code"] == -32009  # a 1.0 name, read as 0.3
        old_name = gateway.rpc("message/send", {}, version="1.0")
        assert error_of(old_name)["code"] == -32009
        assert error_of(gateway.rpc("GetTask", {"id": "x"}, version="2.0"))["code"] == -32009
        assert Thread.objects.count() == 0
        unchanged()

    def test_an_unknown_task_is_not_found(self, gateway: Gateway, unchanged: Any) -> None:
        unchanged(take=True)
        missing = "6a1c2f38-8d3e-4c4b-9a5f-0b8b1e2f3a4c"
        for method, params in [
            ("GetTask", {"id": missing}),
            ("GetTask", {"id": "not-a-uuid"}),
            ("CancelTask", {"id": missing}),
            ("SubscribeToTask", {"id": missing}),
            ("SendMessage", send_params(task_id=missing, text="hello")),
            ("CreateTaskPushNotificationConfig", {"taskId": missing, "url": HOOK}),
        ]:
            error = error_of(gateway.rpc(method, params))
            assert error["code"] == -32001, (method, error)
        assert error_of(gateway.rpc("tasks/get", {"id": missing}, version=None))["code"] == -32001
        unchanged()

    def test_input_longer_than_the_limit_or_of_a_type_not_taken_changes_nothing(
        self, gateway: Gateway, unchanged: Any
    ) -> None:
        task_id = task_in(gateway, "desk", Thread.Status.WAITING_INPUT)
        unchanged(task_id, take=True)

        too_long = error_of(gateway.rpc("SendMessage", send_params(task_id, text="A" * 41)))
        assert too_long["code"] == -32602
        assert "at most 40" in too_long["message"]
        json_input = error_of(gateway.rpc("SendMessage", send_params(task_id, data={"form": "A"})))
        assert json_input["code"] == -32005
        assert "does not accept application/json" in json_input["message"]
        a_file = error_of(
            gateway.rpc(
                "SendMessage", send_params(task_id, url="https://x.test/f.pdf", mediaType="a/b")
            )
        )
        assert a_file["code"] == -32005
        empty = error_of(gateway.rpc("SendMessage", send_params(task_id, text="   ")))
        assert empty["code"] == -32602
        unchanged(task_id)
        ok = gateway.rpc("SendMessage", send_params(task_id, text="A" * 40))
        assert ok.json()["result"]["task"]["status"]["state"] == "TASK_STATE_COMPLETED"

    def test_a_task_not_waiting_for_input_takes_no_message(
        self, gateway: Gateway, unchanged: Any
    ) -> None:
        approving = task_in(gateway, "payer", Thread.Status.SUSPENDED)
        unchanged(approving, take=True)
        text = error_of(gateway.rpc("SendMessage", send_params(approving, text="yes")))
        assert text["code"] == -32004
        assert "waits for approval" in text["message"]
        unchanged(approving)

        answered = task_in(gateway, "helpdesk", Thread.Status.SUSPENDED)
        done = gateway.rpc("SendMessage", send_params(answered, text="staging")).json()
        assert done["result"]["task"]["status"]["state"] == "TASK_STATE_COMPLETED"
        unchanged(answered, take=True)
        late = error_of(gateway.rpc("SendMessage", send_params(answered, text="production")))
        assert late["code"] == -32004
        assert "has ended" in late["message"]
        cancel = error_of(gateway.rpc("CancelTask", {"id": answered}))
        assert cancel["code"] == -32002
        unchanged(answered)
