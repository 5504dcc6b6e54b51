"""Querysets compiled to SQL once per process, then run with other values.

Django compiles a queryset to SQL each time it runs: the select list, the joins, the ordering,
every column quoted anew. On the hot path that compilation costs more than running the
statement (bench/README.md), and the statements every API request and step makes (the bearer
token's row, the caller's permissions, the stack of frames) compile to the same SQL each time
but for their values. `Compiled`
builds such a queryset once per database, with sentinel values standing for the ones that
change, keeps the SQL the ORM made and where each sentinel went in its parameters, and runs it
again with the real values, converting the columns as the ORM would.

Only for `values_list` querysets whose changing values are strings, integers, UUIDs or
datetimes that the ORM passes to the database as they are (a UUID as the hex string, a
datetime as a string on SQLite); a sentinel that does not come out that way is refused when
the query is prepared, so what runs is always SQL the ORM wrote. `CompiledUpdate` does the
same for `queryset.update(...)` (the workers' lease and checkpoint writes), its new values
prepared by their fields. No maintained package does
this for Django: the ones that cache keep results, which would serve a revoked token or a
decided suspension.
"""

import functools
import threading
import uuid
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any, cast

from django.db import connections
from django.db.models import Model, QuerySet
from django.db.models.sql.subqueries import UpdateQuery


@dataclass(frozen=True)
class _Prepared:
    sql: str
    params: tuple[Any, ...]
    # For each parameter: which value and how it goes to the database, or None (a constant).
    slots: tuple["Slot | None", ...]
    converters: tuple[tuple[int, tuple[list[Any], Any]], ...]  # (column, (functions, expression))


class Compiled:
    """`build(*sentinels)` returns the values_list queryset; `rows(*values)` runs it."""

    def __init__(
        self, build: Callable[..., QuerySet[Any, Any]], *sentinels: str | int | uuid.UUID | datetime
    ) -> None:
        self.build = build
        self.sentinels = sentinels
        self._prepared: dict[str, _Prepared] = {}
        self._lock = threading.Lock()

    def _prepare(self, alias: str) -> _Prepared:
        qs = self.build(*self.sentinels).using(alias)
        compiler = qs.query.get_compiler(using=alias)
        sql, params = compiler.as_sql()
        slots = tuple(_slot(self.sentinels, p, connections[alias]) for p in params)
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
        connection = connections[using]
        params = [
            p if slot is None else slot[1](values[slot[0]], connection)
            for slot, p in zip(prepared.slots, prepared.params, strict=True)
        ]
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


class CompiledUpdate:
    """`queryset.update(**values)` compiled once per database, then run with other values.

    `build(*sentinels)` returns `(queryset, values)` as they would go to `update`. A value of
    `values` that is one of the sentinels is prepared at each run by its field, as the ORM
    prepares it (`get_db_prep_save`: JSON, datetimes and all); any other is a constant. The
    filter's values are found in the statement's parameters as `Compiled` finds them, datetimes
    too; a filter over other tables, or a sentinel that does not come out whole, is refused
    when the statement is prepared. `run(*values)` returns the number of rows updated.
    """

    def __init__(
        self, build: Callable[..., tuple[QuerySet[Any, Any], dict[str, Any]]], *sentinels: Any
    ):
        self.build = build
        self.sentinels = sentinels
        self._prepared: dict[str, tuple[str, tuple[Any, ...], tuple[Any, ...]]] = {}
        self._lock = threading.Lock()

    def _prepare(self, alias: str) -> tuple[str, tuple[Any, ...], tuple[Any, ...]]:
        qs, values = self.build(*self.sentinels)
        query = cast(UpdateQuery, qs.query.chain(UpdateQuery))
        query.add_update_values(values)
        if len(query.alias_map) > 1 or query.related_updates:
            raise ValueError(f"{self.build.__qualname__}: only one table's rows")
        compiler = query.get_compiler(using=alias)
        sql, params = compiler.as_sql()
        slots: list[Any] = []
        # The SET clause's parameters come first, one per value that is neither None nor an
        # expression, in the order of query.values (SQLUpdateCompiler.as_sql).
        for field, _, value in query.values:
            if value is None or hasattr(value, "resolve_expression"):
                continue
            index = next((i for i, s in enumerate(self.sentinels) if s is value), None)
            if index is None:
                slots.append(None)
            else:
                slots.append((index, _saved_by(field)))
        for param in params[len(slots) :]:
            slots.append(_slot(self.sentinels, param, connections[alias]))
        used = {slot[0] for slot in slots if slot}
        missing = set(range(len(self.sentinels))) - used
        if missing or len(slots) != len(params):
            raise ValueError(f"{self.build.__qualname__}: values {sorted(missing)} were changed")
        return sql, tuple(params), tuple(slots)

    def run(self, *values: Any, using: str = "default") -> int:
        prepared = self._prepared.get(using)
        if prepared is None:
            with self._lock:
                prepared = self._prepared.get(using) or self._prepare(using)
                self._prepared[using] = prepared
        sql, constants, slots = prepared
        connection = connections[using]
        params = [
            p if slot is None else slot[1](values[slot[0]], connection)
            for slot, p in zip(slots, constants, strict=True)
        ]
        with connection.cursor() as cursor:
            cursor.execute(sql, params)
            return cast(int, cursor.rowcount)


def insert(rows: Sequence[Model], using: str = "default") -> None:
    """Insert `rows` (new instances of one model) in one INSERT ... RETURNING their primary
    keys, a statement written once per model and number of rows; each value is prepared as
    Model.save prepares it (`pre_save`, then `get_db_prep_save`). For hot paths that would
    build the same insert with the ORM each time; no signals are sent (none is connected for
    the models that use it)."""
    if not rows:
        return
    model = type(rows[0])
    connection = connections[using]
    columns = _insert_columns(model)
    if any(f.has_db_default() and not f.has_default() for f in columns):
        raise ValueError(f"{model.__name__}: a column with only a database default")
    params = [
        field.get_db_prep_save(field.pre_save(row, True), connection=connection)
        for row in rows
        for field in columns
    ]
    with connection.cursor() as cursor:
        cursor.execute(_insert_sql(model, connection.vendor, len(rows), using), params)
        keys = [found[0] for found in cursor.fetchall()]
    generated = getattr(model._meta.pk, "db_returning", False)
    for row, key in zip(rows, keys, strict=True):
        if generated:
            row.pk = key  # an auto-incremented key; any other was the row's before the insert
        row._state.adding = False
        row._state.db = using


def _insert_columns(model: type[Model]) -> list[Any]:
    """The columns an insert writes: every concrete one but an auto-incremented key."""
    return [
        f
        for f in model._meta.concrete_fields
        if not (f.primary_key and getattr(f, "db_returning", False))
    ]


@functools.cache
def _insert_sql(model: type[Model], vendor: str, rows: int, using: str) -> str:
    quote = connections[using].ops.quote_name
    columns = _insert_columns(model)
    row = "(" + ", ".join(["%s"] * len(columns)) + ")"
    return (
        f"INSERT INTO {quote(model._meta.db_table)} ({', '.join(quote(f.column) for f in columns)})"
        f" VALUES {', '.join([row] * rows)} RETURNING {quote(model._meta.pk.column)}"
    )


# A slot's function takes the value and the connection it runs on (looked up at each run: a
# connection wrapper belongs to one thread).
Slot = tuple[int, Callable[[Any, Any], Any]]


def _saved_by(field: Any) -> Callable[[Any, Any], Any]:
    return lambda value, connection: field.get_db_prep_save(value, connection=connection)


def _slot(sentinels: tuple[Any, ...], param: Any, connection: Any) -> Slot | None:
    """Which sentinel a filter's parameter is (as `connection`, preparing, passed it), and how
    a value goes to the database as it did; None: a constant."""
    for i, sentinel in enumerate(sentinels):
        if isinstance(sentinel, uuid.UUID):
            # As UUIDField sends it: a UUID, or its hex where the database has no UUIDs.
            if isinstance(param, uuid.UUID) and param == sentinel:
                return i, lambda value, connection: _as_uuid(value)
            if param == sentinel.hex:
                return i, lambda value, connection: _as_uuid(value).hex
        elif isinstance(sentinel, datetime):
            if isinstance(param, datetime) and param == sentinel:
                return i, lambda value, connection: value
            # As SQLite's backend sends it: a string.
            if isinstance(param, str) and param == connection.ops.adapt_datetimefield_value(
                sentinel
            ):
                return i, lambda value, connection: connection.ops.adapt_datetimefield_value(value)
        elif type(param) is type(sentinel) and param == sentinel:
            return i, functools.partial(_as_type, type(sentinel))
    return None


def _as_type(kind: type, value: Any, connection: Any) -> Any:
    return kind(value)


def _as_uuid(value: Any) -> uuid.UUID:
    return value if isinstance(value, uuid.UUID) else uuid.UUID(str(value))


def fields(model: type[Model]) -> list[str]:
    """Every column of `model`, in the order `Model.from_db` takes them."""
    return [f.attname for f in model._meta.concrete_fields]


def sql_of(queryset: QuerySet[Any, Any]) -> tuple[str, tuple[Any, ...]]:
    """The SQL and parameters the ORM writes for `queryset` on the default database, to embed
    in a statement the ORM cannot build (a subquery counted with its own LIMIT)."""
    return queryset.query.sql_with_params()
