"""JSON answers and request parsing shared by the API views."""

import re
import uuid
from collections.abc import Callable
from functools import wraps
from typing import Any

from django.conf import settings
from django.core.exceptions import RequestDataTooBig
from django.http import HttpRequest, HttpResponse, JsonResponse
from django.views import defaults

from agents.policy import DECIDE_PERMISSION
from infra.answers import error
from infra.strict_json import loads  # the API's error answer; the views import it from here

# Deeper than any tool's arguments need; well below the recursion limit that json.dumps,
# jsonschema and the JSONField hit on the way to the database.
MAX_JSON_DEPTH = 32


# json.loads joins a valid surrogate pair into one character, so any surrogate left is alone.
LONE_SURROGATE = re.compile("[\ud800-\udfff]")


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


def not_found(what: str) -> JsonResponse:
    return error(404, "not_found", f"No such {what}.")


def bad_request(e: BadRequest) -> JsonResponse:
    """The answer to a refused request: its status, code, detail and field errors."""
    return error(e.status, e.code, e.detail, e.fields)


def server_error(request: HttpRequest) -> HttpResponse:
    """handler500: API callers get the JSON error shape too; pages get Django's plain page."""
    if request.path.startswith("/api/"):
        return error(500, "server_error", "The server failed to answer; try again later.")
    return defaults.server_error(request)


def json_body(request: HttpRequest) -> dict[str, Any]:
    """The body as a JSON object that every endpoint can store: bounded in size and depth,
    with no text PostgreSQL or UTF-8 cannot hold (NUL, lone surrogates), and no number JSON
    cannot hold (NaN, Infinity)."""
    try:
        raw = request.body
    except RequestDataTooBig as e:
        raise BadRequest(
            f"The body is larger than {settings.DATA_UPLOAD_MAX_MEMORY_SIZE} bytes.",
            code="too_large",
            status=413,
        ) from e
    try:
        data = loads(raw or b"")
    except RecursionError as e:
        raise BadRequest(
            f"The body is nested more than {MAX_JSON_DEPTH} levels deep.", code="invalid_json"
        ) from e
    except (ValueError, UnicodeDecodeError) as e:
        raise BadRequest(f"The body is not valid JSON: {e}", code="invalid_json") from e
    if not isinstance(data, dict):
        raise BadRequest("The body must be a JSON object.", code="invalid_json")
    _check_storable(data)
    return data


def _check_storable(data: dict[str, Any]) -> None:
    """Refuse what json.loads accepts but the rest of the stack cannot take: deep nesting,
    NUL (PostgreSQL text and jsonb reject it) and lone surrogates (not encodable as UTF-8).
    Walked with an explicit stack, so the check itself cannot recurse too deep."""
    pending: list[tuple[str, Any, int]] = [("", data, 1)]
    while pending:
        path, value, depth = pending.pop()
        if depth > MAX_JSON_DEPTH:
            raise BadRequest(
                f"The body is nested more than {MAX_JSON_DEPTH} levels deep.",
                {path.split(".")[0]: "Nested too deep."},
                code="invalid_json",
            )
        if isinstance(value, dict):
            for key, item in value.items():
                where = f"{path}.{key}" if path else key
                _check_text(key, where)
                pending.append((where, item, depth + 1))
        elif isinstance(value, list):
            pending.extend((f"{path}.{i}", item, depth + 1) for i, item in enumerate(value))
        elif isinstance(value, str):
            _check_text(value, path)


def _check_text(text: str, path: str) -> None:
    # The error names the field in text that can itself be sent back as JSON.
    path = LONE_SURROGATE.sub("\ufffd", path.replace("\x00", "\ufffd"))
    if "\x00" in text:
        raise BadRequest(
            "Text may not contain NUL characters.", {path: "Remove the NUL (\\u0000) characters."}
        )
    if LONE_SURROGATE.search(text):
        raise BadRequest(
            "Text may not contain lone surrogates.",
            {path: "Send valid Unicode: a \\ud800-\\udfff escape only as half of a pair."},
        )


def text_too_long(value: Any, limit: int) -> str | None:
    """The field error for a string over `limit` characters, else None."""
    if isinstance(value, str) and len(value) > limit:
        return f"At most {limit} characters (this has {len(value)})."
    return None


def whole_number(value: str) -> int | None:
    """A non-negative integer in ASCII digits; str.isdigit alone lets "²" through to int()."""
    return int(value) if value.isascii() and value.isdigit() else None


# The largest id a bigint column holds: a bigger number matches no row, and the database
# drivers refuse to send it (SQLite raises OverflowError), so the API answers 400 or 404.
MAX_ROW_ID = 2**63 - 1


def row_id(value: str) -> int | None:
    """whole_number, but None past MAX_ROW_ID: an id or an offset a query can carry."""
    number = whole_number(value)
    return number if number is not None and number <= MAX_ROW_ID else None


def parse_uuid(value: str) -> uuid.UUID | None:
    try:
        return uuid.UUID(value)
    except (ValueError, TypeError):
        return None


def reviewer_post(login_for: str) -> Callable[[Callable], Callable]:
    """A page's JSON endpoint: POST, from a logged-in reviewer who may decide (CSRF is checked
    by Django's middleware, as on every page's form). `login_for` ends the 401's words: "Log
    in on the page to <login_for>."."""

    def decorate(view: Callable) -> Callable:
        @wraps(view)
        def wrapper(request: HttpRequest, *args: Any, **kwargs: Any) -> HttpResponse:
            if request.method != "POST":
                response = error(405, "method_not_allowed", "Use POST.")
                response["Allow"] = "POST"
                return response
            if not request.user.is_authenticated:
                return error(401, "unauthenticated", f"Log in on the page to {login_for}.")
            if not request.user.has_perm(DECIDE_PERMISSION):
                return error(403, "forbidden", "You do not have permission to do this.")
            return view(request, *args, **kwargs)

        return wrapper

    return decorate
