"""The A2A methods by name: for 1.0 and for 0.3, the request type a method's params parse
into and what answers it (a2a_server.handler, through the SDK's RequestHandler03 for the 0.3
names), and this gateway's own tasks/provideInputAndContinue and
tasks/getInputRequired."""

from collections.abc import Callable
from typing import Any

from a2a.compat.v0_3 import conversions
from a2a.compat.v0_3 import types as v03
from a2a.compat.v0_3.request_handler import RequestHandler03
from a2a.server.context import ServerCallContext
from a2a.server.routes.common import serialize_list_tasks_response
from a2a.types import (
    CancelTaskRequest,
    DeleteTaskPushNotificationConfigRequest,
    GetExtendedAgentCardRequest,
    GetTaskPushNotificationConfigRequest,
    GetTaskRequest,
    InvalidParamsError,
    ListTaskPushNotificationConfigsRequest,
    ListTasksRequest,
    Message,
    SendMessageRequest,
    SendMessageResponse,
    SubscribeToTaskRequest,
    Task,
    TaskPushNotificationConfig,
    TaskState,
)
from a2a.utils import proto_utils
from google.protobuf import json_format
from google.protobuf.message import Message as Proto
from pydantic import ValidationError

from a2a_server.handler import GatewayRequestHandler

V10, V03 = "1.0", "0.3"

handler = GatewayRequestHandler()
handler03 = RequestHandler03(handler)


def dump(message: Proto) -> dict[str, Any]:
    return json_format.MessageToDict(message)


def dump03(model: Any) -> Any:
    return model.model_dump(mode="json", by_alias=True, exclude_none=True)


# A method: the request type its params parse into, and what answers it (a coroutine whose
# result is the JSON `result`, or an async iterator of results for a stream).
Method = tuple[type, Callable[[Any, ServerCallContext], Any], bool]


async def _send(request: SendMessageRequest, context: ServerCallContext) -> dict[str, Any]:
    found = await handler.on_message_send(request, context)
    if isinstance(found, Task):
        return dump(SendMessageResponse(task=found))
    return dump(SendMessageResponse(message=found))


async def _list(request: ListTasksRequest, context: ServerCallContext) -> dict[str, Any]:
    found = await handler.on_list_tasks(request, context)
    return serialize_list_tasks_response(found, request.include_artifacts)


def _answer(method: Callable[..., Any], shape: Callable[[Any], Any] = dump) -> Callable:
    async def answer(request: Any, context: ServerCallContext) -> Any:
        found = await method(request, context)
        return None if found is None else shape(found)

    return answer


async def _stream10(method: Callable[..., Any], request: Any, context: ServerCallContext) -> Any:
    async for update in method(request, context):
        yield update, dump(proto_utils.to_stream_response(update))


METHODS_10: dict[str, Method] = {
    "SendMessage": (SendMessageRequest, _send, False),
    "SendStreamingMessage": (
        SendMessageRequest,
        lambda r, c: _stream10(handler.on_message_send_stream, r, c),
        True,
    ),
    "GetTask": (GetTaskRequest, _answer(handler.on_get_task), False),
    "ListTasks": (ListTasksRequest, _list, False),
    "CancelTask": (CancelTaskRequest, _answer(handler.on_cancel_task), False),
    "SubscribeToTask": (
        SubscribeToTaskRequest,
        lambda r, c: _stream10(handler.on_subscribe_to_task, r, c),
        True,
    ),
    "CreateTaskPushNotificationConfig": (
        TaskPushNotificationConfig,
        _answer(handler.on_create_task_push_notification_config),
        False,
    ),
    "GetTaskPushNotificationConfig": (
        GetTaskPushNotificationConfigRequest,
        _answer(handler.on_get_task_push_notification_config),
        False,
    ),
    "ListTaskPushNotificationConfigs": (
        ListTaskPushNotificationConfigsRequest,
        _answer(handler.on_list_task_push_notification_configs),
        False,
    ),
    "DeleteTaskPushNotificationConfig": (
        DeleteTaskPushNotificationConfigRequest,
        _answer(handler.on_delete_task_push_notification_config),
        False,
    ),
    "GetExtendedAgentCard": (
        GetExtendedAgentCardRequest,
        _answer(handler.on_get_extended_agent_card),
        False,
    ),
}


async def _stream03(method: Callable[..., Any], request: Any, context: ServerCallContext) -> Any:
    async for response in method(request, context):
        yield response.result, dump03(response.result)


def _list03(found: list[Any]) -> list[Any]:
    return [dump03(c) for c in found]


# The 0.3 names, served through the same handler by the SDK's RequestHandler03, which converts
# the 0.3 types to 1.0 and back. The 0.3 params parse as a whole 0.3 request.
METHODS_03: dict[str, Method] = {
    "message/send": (v03.SendMessageRequest, _answer(handler03.on_message_send, dump03), False),
    "message/stream": (
        v03.SendStreamingMessageRequest,
        lambda r, c: _stream03(handler03.on_message_send_stream, r, c),
        True,
    ),
    "tasks/get": (v03.GetTaskRequest, _answer(handler03.on_get_task, dump03), False),
    "tasks/cancel": (v03.CancelTaskRequest, _answer(handler03.on_cancel_task, dump03), False),
    "tasks/resubscribe": (
        v03.TaskResubscriptionRequest,
        lambda r, c: _stream03(handler03.on_subscribe_to_task, r, c),
        True,
    ),
    "tasks/pushNotificationConfig/set": (
        v03.SetTaskPushNotificationConfigRequest,
        _answer(handler03.on_create_task_push_notification_config, dump03),
        False,
    ),
    "tasks/pushNotificationConfig/get": (
        v03.GetTaskPushNotificationConfigRequest,
        _answer(handler03.on_get_task_push_notification_config, dump03),
        False,
    ),
    "tasks/pushNotificationConfig/list": (
        v03.ListTaskPushNotificationConfigRequest,
        _answer(handler03.on_list_task_push_notification_configs, _list03),
        False,
    ),
    "tasks/pushNotificationConfig/delete": (
        v03.DeleteTaskPushNotificationConfigRequest,
        _answer(handler03.on_delete_task_push_notification_config),
        False,
    ),
    "agent/getAuthenticatedExtendedCard": (
        v03.GetAuthenticatedExtendedCardRequest,
        _answer(handler03.on_get_extended_agent_card, dump03),
        False,
    ),
}

# The seed's methods (input-required-conversations), in either version: the input and the
# tasks are in that version's shapes.
PROVIDE_INPUT = "tasks/provideInputAndContinue"
GET_INPUT_REQUIRED = "tasks/getInputRequired"


def parse(kind: type, params: dict[str, Any], data: dict[str, Any], version: str) -> Any:
    """The params as the method's request type: a 1.0 proto message (unknown fields ignored,
    as the SDK's own server reads them), or a whole 0.3 request."""
    try:
        if version == V10:
            return json_format.ParseDict(params, kind(), ignore_unknown_fields=True)
        return kind.model_validate({**data, "params": params})
    except (json_format.ParseError, ValidationError, TypeError, ValueError) as e:
        raise InvalidParamsError(f"The params do not fit the method: {_short(e)}") from e


def _short(error: Exception) -> str:
    text = str(error)
    return text if len(text) <= 500 else text[:500] + "…"


async def seed_method(
    method: str, params: dict[str, Any], version: str, context: ServerCallContext
) -> Any:
    """tasks/provideInputAndContinue {taskId, input: Message} answers like SendMessage on that
    task; tasks/getInputRequired {pageSize?, pageToken?, historyLength?} lists the tasks that
    wait for a person, as ListTasks with that state does."""
    if method == GET_INPUT_REQUIRED:
        known = {"pageSize", "pageToken", "historyLength", "metadata"}
        request = parse(ListTasksRequest, {k: v for k, v in params.items() if k in known}, {}, V10)
        request.status = TaskState.TASK_STATE_INPUT_REQUIRED
        found = await handler.on_list_tasks(request, context)
        listed = serialize_list_tasks_response(found, False)
        if version == V03:
            listed["tasks"] = [dump03(conversions.to_compat_task(t)) for t in found.tasks]
        return listed
    task_id = params.get("taskId")
    given = params.get("input")
    if not isinstance(task_id, str) or not task_id:
        raise InvalidParamsError(
            "Name the task: taskId.", data={"errors": [{"field": "taskId", "message": "Required."}]}
        )
    if not isinstance(given, dict):
        raise InvalidParamsError(
            "Send the input: a message.",
            data={"errors": [{"field": "input", "message": "A message object."}]},
        )
    if given.get("taskId", task_id) != task_id:
        raise InvalidParamsError(
            "input.taskId differs from taskId.",
            data={"errors": [{"field": "input.taskId", "message": "Leave it out or repeat it."}]},
        )
    message = _seed_message({**given, "taskId": task_id}, version)
    request = SendMessageRequest(message=message)
    if isinstance(params.get("metadata"), dict):
        request.metadata.update(params["metadata"])
    task = await handler.on_message_send(request, context)
    if version == V03:
        return dump03(conversions.to_compat_task(task))
    return dump(task)


def _seed_message(given: dict[str, Any], version: str) -> Message:
    try:
        if version == V10:
            return json_format.ParseDict(given, Message(), ignore_unknown_fields=True)
        return conversions.to_core_message(v03.Message.model_validate({"kind": "message", **given}))
    except (json_format.ParseError, ValidationError, TypeError, ValueError) as e:
        raise InvalidParamsError(f"input is not a message: {_short(e)}") from e
