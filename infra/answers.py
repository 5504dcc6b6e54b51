"""The API's error answer, one shape for every door: `{"error": code, "detail": ...}` with the
field errors when there are some. Here, below the apps, because access (tokens, scopes, rate
limits) answers with it before approvals' views are reached."""

from typing import Any

from django.http import JsonResponse


def error(
    status: int, code: str, detail: str, /, fields: dict[str, str] | None = None, **extra: Any
) -> JsonResponse:
    """An error answer; `extra` may repeat a parameter's name (the 409s report `status`)."""
    return JsonResponse(error_body(code, detail, fields, **extra), status=status)


def error_body(
    code: str, detail: str, /, fields: dict[str, str] | None = None, **extra: Any
) -> dict[str, Any]:
    """The error answer's body, for an answer that carries it inside another (one item of
    POST /api/decisions)."""
    body: dict[str, Any] = {"error": code, "detail": detail}
    if fields:
        body["fields"] = fields
    body.update(extra)
    return body
