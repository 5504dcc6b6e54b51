"""Canonical hashes of what a reviewer is shown, so a decision can be bound to it.

The same JSON value always gives the same hash, whatever the key order or spacing it arrived
with (PostgreSQL's jsonb reorders keys; a client may too): keys sorted, no spaces, UTF-8,
non-ASCII kept as is. A verifier outside the gateway recomputes it with
`sha256(json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False))`.
"""

import hashlib
import json
from typing import Any


def canonical_json(value: Any) -> str:
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False)


def canonical_hash(value: Any) -> str:
    """SHA-256 (hex) of the canonical JSON of `value`."""
    return hashlib.sha256(canonical_json(value).encode()).hexdigest()
