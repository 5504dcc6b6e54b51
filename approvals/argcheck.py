"""Edited arguments checked against the tool's input schema, in a reviewer's words: the field
errors of resumeExecution's 400 answer, which the cards show beside each field (the pages have
no validator of their own)."""

import json
import re
from typing import Any

from jsonschema import Draft202012Validator
from jsonschema.exceptions import ValidationError

from approvals.templatetags.cards import field_order


def _number(value: Any) -> str:
    return json.dumps(value)


def _article(kind: str) -> str:
    return "an" if kind[:1] in "aeiou" else "a"


def _words(error: ValidationError) -> str:
    """What is wrong with one value, as a reviewer reads it ("must be greater than 0")."""
    v, limit = error.validator, error.validator_value
    if v == "type":
        kinds = limit if isinstance(limit, list) else [limit]
        wanted = " or ".join(str(k) for k in kinds)
        return f"must be {_article(wanted)} {wanted}"
    if v == "enum" and isinstance(limit, list):
        return "must be one of " + ", ".join(json.dumps(x, ensure_ascii=False) for x in limit)
    if v == "const":
        return f"must be {json.dumps(limit, ensure_ascii=False)}"
    if v == "minimum":
        return f"must be at least {_number(limit)}"
    if v == "maximum":
        return f"must be at most {_number(limit)}"
    if v == "exclusiveMinimum":
        return f"must be greater than {_number(limit)}"
    if v == "exclusiveMaximum":
        return f"must be less than {_number(limit)}"
    if v == "minLength":
        return "must not be empty" if limit == 1 else f"must be at least {limit} characters"
    if v == "maxLength":
        return f"must be at most {limit} characters"
    if v == "minItems":
        return "must not be empty" if limit == 1 else f"must have at least {limit} items"
    if v == "maxItems":
        return f"must have at most {limit} items"
    if v == "pattern":
        return f"must match {limit}"
    return str(error.message)


def field_errors(schema: dict[str, Any], args: Any) -> dict[str, str]:
    """Each field's error, keyed by its path ("" for the arguments as a whole), in the card's
    field order."""
    if not isinstance(args, dict):
        return {"": "must be a JSON object"}
    errors: dict[str, str] = {}
    for error in Draft202012Validator(schema or {"type": "object"}).iter_errors(args):
        path = ".".join(str(p) for p in error.absolute_path)
        if error.validator == "required":
            # "'amount' is a required property" names the field in the message only.
            missing = error.message.split("'")[1] if "'" in error.message else ""
            errors.setdefault(".".join(p for p in (path, missing) if p), "is required")
        elif error.validator == "additionalProperties" and isinstance(error.instance, dict):
            known = set(error.schema.get("properties", {}))
            patterns = list(error.schema.get("patternProperties", {}))
            for extra in sorted(
                k
                for k in error.instance
                if k not in known and not any(re.search(p, k) for p in patterns)
            ):
                errors.setdefault(
                    ".".join(p for p in (path, extra) if p), "is not a field of this tool"
                )
        else:
            errors.setdefault(path, _words(error))
    # In the order the card shows the fields (the schema's order would depend on the database:
    # PostgreSQL's jsonb sorts an object's keys), the arguments as a whole first.
    order = {name: i for i, name in enumerate(field_order(schema, args))}

    def place(path: str) -> int:
        return -1 if not path else order.get(path.split(".")[0], len(order))

    return {path: errors[path] for path in sorted(errors, key=place)}
