"""Querysets compiled to SQL once per process, then run with other values.

Django compiles a queryset to SQL each time it runs: the select list, the joins, the ordering,
every column quoted anew. Under bench/cycles.py that compilation is a fifth of daphne's CPU
(bench/README.md), and the statements every API request makes (the bearer token's row, the
caller's permissions) compile to the same SQL each time but for their values. `Compiled`
builds such a queryset once per database, with sentinel values standing for the ones that
change, keeps the SQL the ORM made and where each sentinel went in its parameters, and runs it
again with the real values, converting the columns as the ORM would.

Only for `values_list` querysets whose changing values are strings, integers or UUIDs that the
ORM passes to the database as they are (a UUID as the hex string on SQLite); a sentinel that
does not come out that way is refused when the query is prepared, so what runs is always SQL
the ORM wrote. No maintained package does this for Django: the ones that cache keep results,
which would serve a revoked token or a decided suspension.
"""

import threading
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from django.db import connections
from django.db.models import Model, QuerySet


@dataclass(frozen=True)
class _Prepared:
    sql: str
    params: tuple[Any, ...]
    # For each parameter: which value and how it goes to the database, or None (a constant).
    slots: tuple[tuple[int, Callable[[Any], Any]] | None, ...]
    converters: tuple[tuple[int, tuple[list[Any], Any]], ...]  # (column, (functions, expression))


class Compiled:
    """`build(*sentinels)` returns the values_list queryset; `rows(*values)` runs it."""

    def __init__(self, build: Callable[..., QuerySet], *sentinels: str | int | uuid.UUID) -> None:
        self.build = build
        self.sentinels = sentinels
        self._prepared: dict[str, _Prepared] = {}
        self._lock = threading.Lock()

    def _slot(self, param: Any) -> tuple[int, Callable[[Any], Any]] | None:
        for i, sentinel in enumerate(self.sentinels):
            if isinstance(sentinel, uuid.UUID):
                # As UUIDField sends it: a UUID, or its hex where the database has no UUIDs.
                if isinstance(param, uuid.UUID) and param == sentinel:
                    return i, _as_uuid
                if param == sentinel.hex:
                    return i, lambda value: _as_uuid(value).hex
            elif type(param) is type(sentinel) and param == sentinel:
                return i, type(sentinel)
        return None

    def _prepare(self, alias: str) -> _Prepared:
        qs = self.build(*self.sentinels).using(alias)
        compiler = qs.query.get_compiler(using=alias)
        sql, params = compiler.as_sql()
        slots = tuple(self._slot(p) for p in params)
        missing = set(range(len(self.sentinels))) - {slot[0] for slot in slots if slot}
        if missing:
            raise ValueError(f"{self.build.__qualname__}: values {sorted(missing)} were changed")
        columns = [s[0] for s in compiler.select[: compiler.col_count]]
        converters = tuple(compiler.get_converters(columns).items())
        return _Prepared(sql, tuple(params), slots, converters)

    def rows(self, *values: Any, using: str = "default") -> list[tuple[Any, ...]]:
        """The rows, as `values_list` would give them, for these values of the sentinels."""
        prepared = self._prepared.get(using)
        if prepared is None:
            with self._lock:
                prepared = self._prepared.get(using) or self._prepare(using)
                self._prepared[using] = prepared
        params = [
            p if slot is None else slot[1](values[slot[0]])
            for slot, p in zip(prepared.slots, prepared.params, strict=True)
        ]
        connection = connections[using]
        with connection.cursor() as cursor:
            cursor.execute(prepared.sql, params)
            rows = cursor.fetchall()
        if not prepared.converters:
            return [tuple(r) for r in rows]
        converted = []
        for row in rows:
            row = list(row)
            for position, (functions, expression) in prepared.converters:
                value = row[position]
                for convert in functions:
                    value = convert(value, expression, connection)
                row[position] = value
            converted.append(tuple(row))
        return converted

    def instances(self, model: type[Model], *values: Any, using: str = "default") -> list[Any]:
        """The rows as `model` instances, for a queryset built as
        `.values_list(*fields(model))`."""
        names = fields(model)
        return [model.from_db(using, names, row) for row in self.rows(*values, using=using)]


def _as_uuid(value: Any) -> uuid.UUID:
    return value if isinstance(value, uuid.UUID) else uuid.UUID(str(value))


def fields(model: type[Model]) -> list[str]:
    """Every column of `model`, in the order `Model.from_db` takes them."""
    return [f.attname for f in model._meta.concrete_fields]
