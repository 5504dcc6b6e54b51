"""JSON as the gateway takes it in: what every layer below can store."""

import json
import math
from typing import Any


def loads(raw: bytes | str) -> Any:
    """json.loads, refusing the numbers JSON has no room for: NaN, Infinity and -Infinity
    (which Python writes and reads, SQLite keeps and PostgreSQL's jsonb turns into null) and
    a number too large for a float (1e400, which Python reads as Infinity). Raises ValueError."""
    return json.loads(raw, parse_constant=_not_a_number, parse_float=_finite)


def _not_a_number(name: str) -> float:
    raise ValueError(f"{name} is not a JSON number (send null or a string)")


def _finite(text: str) -> float:
    number = float(text)
    if not math.isfinite(number):
        raise ValueError(f"the number {text} is out of range")
    return number
