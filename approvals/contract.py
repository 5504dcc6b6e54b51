"""One contract for request bodies: the model that describes a body in the OpenAPI document
(approvals/api/bodies.py, a subclass of approvals.openapi.Body) is the one that parses it.

    body = parse(Extend, json_body(request))     # an Extend, or BadRequest (400 `invalid`)

A refusal keeps the API's error shape, `{"error": "invalid", "detail", "fields"}`, with each
field's message in the API's words, never pydantic's:

- a field the body names and the model does not: "Unknown field.";
- whatever pydantic finds wrong in a field (missing, a wrong type, out of range): the model's
  `says` for the field, or for the nearest field above it ("seen" for "seen.extra");
- a rule a type cannot say (text that is not blank, a MAX_* setting, fields that go
  together): its validator raises Wrong(message, detail, field).

The body as sent is in the validation context, so a validator can tell a field sent as null
from one left out (`sent(info, "tool")`); a view may add to the context (parse(..., k=v)).

A body may hold bodies of their own (each decision of POST /api/decisions is a resumeExecution
body): a validator parses such a field with `inside(model, value, ...)`, as parse() would parse
it alone, and a refusal names its fields under the field's path ("decisions.3.decision.reason").
"""

from collections.abc import Callable, Mapping
from typing import Any, TypeVar

from pydantic import ValidationError, ValidationInfo
from pydantic_core import ErrorDetails

from approvals.http import BadRequest, text_too_long
from approvals.openapi import Body

UNKNOWN = "Unknown field."

B = TypeVar("B", bound=Body)
T = TypeVar("T")


class Wrong(ValueError):
    """A validator's refusal: `message` for the field (or for `field`, when the rule is about
    another one or about several), and the answer's `detail` (None: the model's `refused`)."""

    def __init__(self, message: str, detail: str | None = None, field: str | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.detail = detail
        self.field = field


class Inside(Wrong):
    """The refusal of a body within the body (`inside`): its field errors, by their paths
    within it, and its detail (the message)."""

    def __init__(self, detail: str, fields: dict[str, str]) -> None:
        super().__init__(detail, detail)
        self.fields = fields


def parse(model: type[B], data: dict[str, Any], **context: Any) -> B:
    """`data` (a JSON object, approvals.http.json_body) as `model`; raises BadRequest."""
    try:
        return model.model_validate(data, strict=True, context={**context, "body": data})
    except ValidationError as e:
        raise bad_request(model, e) from None


def bad_request(model: type[Body], error: ValidationError) -> BadRequest:
    """The API's answer to a body `model` refuses: every field that is wrong, named by its
    path, with the message the model gives it; the detail of the first refusal that has one
    (an unknown field first, as the views always answered)."""
    fields: dict[str, str] = {}
    details: list[str] = []
    unknown = False
    for found in error.errors():
        cause = found.get("ctx", {}).get("error")
        if isinstance(cause, Inside):
            at = ".".join(str(part) for part in found["loc"])
            for path, message in cause.fields.items():
                fields.setdefault(f"{at}.{path}" if path else at, message)
            details.append(cause.message)
            continue
        where, message, detail = _explain(model, found)
        fields.setdefault(where, message)
        unknown = unknown or message == UNKNOWN
        if detail:
            details.append(detail)
    if unknown and model.unknown:
        details.insert(0, model.unknown)
    return BadRequest(details[0] if details else model.refused, fields)


def inside(model: type[B], value: Any, info: ValidationInfo, not_an_object: str) -> B:
    """A field's value that is a body of its own, parsed by `model` as parse() parses a whole
    body (its validators see it as the body sent); raises Inside, or Wrong(not_an_object)."""
    if not isinstance(value, dict):
        raise Wrong(not_an_object)
    context = {k: v for k, v in (info.context or {}).items() if k != "body"}
    try:
        return parse(model, value, **context)
    except BadRequest as e:
        raise Inside(e.detail, e.fields or {"": e.detail}) from None


def _explain(model: type[Body], found: ErrorDetails) -> tuple[str, str, str | None]:
    """(field path, message, detail or None) of one error pydantic reports."""
    loc = [str(part) for part in found["loc"]]
    cause = found.get("ctx", {}).get("error")
    if isinstance(cause, Wrong):
        return cause.field or ".".join(loc), cause.message, cause.detail
    for end in range(len(loc), 0, -1):
        path = ".".join(loc[:end])
        if path in model.says:
            return path, _words(model.says, path), None
    if found["type"] == "extra_forbidden":
        return ".".join(loc), UNKNOWN, None
    # A field the model has no words for (tests/approvals/test_contract.py keeps this from
    # happening): pydantic's own.
    return ".".join(loc), found["msg"], None


def _words(says: Mapping[str, str | Callable[[], str]], path: str) -> str:
    said = says[path]
    return said() if callable(said) else said


def says(model: type[Body], path: str) -> str:
    """The model's message for a field (for a validator that refuses in the same words)."""
    return _words(model.says, path)


def sent(info: ValidationInfo, name: str) -> bool:
    """Whether the body as sent names `name` (a field may be null, or left out)."""
    return name in body(info)


def body(info: ValidationInfo) -> dict[str, Any]:
    """The body as sent, from the validation context parse() sets."""
    found: dict[str, Any] = (info.context or {}).get("body", {})
    return found


def written(
    value: Any,
    empty: str,
    limit: int | None = None,
    *,
    detail: str | None = None,
    too_long: str | None = None,
) -> str:
    """Text with something in it (else Wrong(empty, detail)), of at most `limit` characters
    (else Wrong naming the limit, with the detail `too_long`)."""
    if not isinstance(value, str) or not value.strip():
        raise Wrong(empty, detail)
    if limit is not None and (over := text_too_long(value, limit)):
        raise Wrong(over, too_long)
    return value


def within(value: T, limit: int, too_long: str | None = None) -> T:
    """`value` unless it is text of more than `limit` characters (any other type is the type
    check's to refuse)."""
    if over := text_too_long(value, limit):
        raise Wrong(over, too_long)
    return value
