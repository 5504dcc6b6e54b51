"""JSON answers and request parsing shared by the API views."""

import json
import uuid
from typing import Any

from django.conf import settings
from django.core.exceptions import RequestDataTooBig
from django.http import HttpRequest, HttpResponse, JsonResponse
from django.views import defaults


class BadRequest(Exception):
    """A request the API refuses; the view answers it with `status` and the field errors."""

    def __init__(
        self,
        detail: str,
        fields: dict[str, str] | None = None,
        code: str = "invalid",
        status: int = 400,
    ) -> None:
        super().__init__(detail)
        self.detail = detail
        self.fields = fields
        self.code = code
        self.status = status


def error(
    status: int, code: str, detail: str, /, fields: dict[str, str] | None = None, **extra: Any
) -> JsonResponse:
    """An error answer; `extra` may repeat a parameter's name (the 409s report `status`)."""
    body: dict[str, Any] = {"error": code, "detail": detail}
    if fields:
        body["fields"] = fields
    body.update(extra)
    return JsonResponse(body, status=status)


def server_error(request: HttpRequest) -> HttpResponse:
    """handler500: API callers get the JSON error shape too; pages get Django's plain page."""
    if request.path.startswith("/api/"):
        return error(500, "server_error", "The server failed to answer; try again later.")
    return defaults.server_error(request)


def json_body(request: HttpRequest) -> dict[str, Any]:
    try:
        raw = request.body
    except RequestDataTooBig as e:
        raise BadRequest(
            f"The body is larger than {settings.DATA_UPLOAD_MAX_MEMORY_SIZE} bytes.",
            code="too_large",
            status=413,
        ) from e
    try:
        data = json.loads(raw or b"")
    except (ValueError, UnicodeDecodeError) as e:
        raise BadRequest(f"The body is not valid JSON: {e}", code="invalid_json") from e
    if not isinstance(data, dict):
        raise BadRequest("The body must be a JSON object.", code="invalid_json")
    return data


def whole_number(value: str) -> int | None:
    """A non-negative integer in ASCII digits; str.isdigit alone lets "²" through to int()."""
    return int(value) if value.isascii() and value.isdigit() else None


def parse_uuid(value: str) -> uuid.UUID | None:
    try:
        return uuid.UUID(value)
    except (ValueError, TypeError):
        return None
