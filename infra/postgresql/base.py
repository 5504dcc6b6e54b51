"""Django's PostgreSQL backend; only the pool's check of a connection (infra.dbpool) and the
JSON encoder of JSONField values differ."""

import json
from typing import Any

import orjson
from django.db.backends.postgresql import base, operations
from psycopg.types.json import Jsonb

from infra import dbpool

# What orjson hands back to `json.dumps` rather than encoding itself: datetimes, dataclasses and
# subclasses of str, int, dict and list, which json.dumps refuses or encodes its own way.
_AS_JSON_DOES = (
    orjson.OPT_PASSTHROUGH_DATETIME
    | orjson.OPT_PASSTHROUGH_DATACLASS
    | orjson.OPT_PASSTHROUGH_SUBCLASS
)


def dumps(value: Any) -> bytes | str:
    """A JSONField value's text for PostgreSQL, by orjson: a run's frame (its whole conversation)
    is written at every step, and json.dumps was a visible part of a worker's CPU
    (bench/README.md). What orjson does not take as json.dumps
    would (keys that are not strings, integers beyond 64 bits, the types above) goes to
    json.dumps, so those encode, or fail, as they did."""
    try:
        return orjson.dumps(value, option=_AS_JSON_DOES)
    except TypeError:
        return json.dumps(value)


class DatabaseOperations(operations.DatabaseOperations):
    def adapt_json_value(self, value: Any, encoder: Any) -> Jsonb:
        if encoder is not None:  # a field's own encoder: Django's way
            return super().adapt_json_value(value, encoder)
        return Jsonb(value, dumps=dumps)


class DatabaseWrapper(base.DatabaseWrapper):
    ops_class = DatabaseOperations

    @property
    def pool(self) -> Any:
        pool = super().pool
        if pool is not None and not getattr(pool, "_checks_all_when_one_is_dead", False):
            # Django hands the pool a check of its own choosing (or none) and no setting
            # changes it; psycopg_pool keeps it in this attribute.
            pool._check = dbpool.checker(pool)
            pool._checks_all_when_one_is_dead = True
        return pool
