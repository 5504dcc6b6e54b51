"""Tripwires: the private names of libraries the code reaches into, each still there with the
shape it relies on. One test per reach of ARCHITECTURE.md's table ("Reaches into libraries'
private names"); the libraries are pinned to a minor version in pyproject.toml, and an
upgrade that moves a name fails here, naming the module to adapt, rather than in production.
The behaviour each reach buys is tested beside its module (tests/test_compiled.py,
test_broker.py, test_pubsub.py, test_dbpool.py, test_asgi.py, test_aio.py,
tests/mcp_gateway/test_sessions.py).
"""

import ast
import asyncio
import inspect
import re
import threading
import uuid
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
from django.db import connection, transaction

from tests.test_architecture import PACKAGES


def moved(library: str, name: str, ours: str) -> str:
    return (
        f"{library}: {name} is gone or changed shape, and {ours} relies on it (ARCHITECTURE.md,"
        ' "Reaches into libraries\' private names"). Adapt it, or drop the speed-up, before'
        " moving the pin in pyproject.toml."
    )


def parameters(func: Any) -> list[str]:
    return list(inspect.signature(func).parameters)


# Django ------------------------------------------------------------------------------------


def test_django_transaction_state(db: Any) -> None:
    from infra import transactions

    why = moved("Django", "in_atomic_block, run_on_commit, savepoint_ids", "infra.transactions")

    def callback() -> None:
        pass

    with transaction.atomic():
        assert connection.in_atomic_block is True, why
        transaction.on_commit(callback)
        entry = connection.run_on_commit[-1]
        assert isinstance(entry, tuple) and len(entry) == 3, why
        sids, func, _ = entry
        assert func is callback and sids == set(connection.savepoint_ids), why
        assert next(transactions.scheduled()) == (callback, True), why
        with transaction.atomic():
            assert next(transactions.scheduled()) == (callback, False), why


def test_django_sql_compiler(db: Any) -> None:
    from agents.models import Suspension

    why = moved(
        "Django", "SQLCompiler.as_sql, select, col_count, get_converters", "infra.compiled.Compiled"
    )
    wanted = uuid.uuid4()
    qs = Suspension.objects.filter(pk=wanted).values_list("tool_name", "modified_args")
    compiler = qs.query.get_compiler(using="default")
    sql, params = compiler.as_sql()
    assert isinstance(sql, str) and len(params) == 1, why
    assert compiler.col_count == 2, why
    columns = [s[0] for s in compiler.select[: compiler.col_count]]
    assert all(hasattr(c, "output_field") for c in columns), why
    converters = compiler.get_converters(columns)
    # JSONField converts what the database returns (from_db_value) on every backend.
    functions, expression = converters[1]
    assert expression is columns[1] and all(callable(f) for f in functions), why
    assert parameters(functions[-1])[-3:] == ["value", "expression", "connection"], why
    assert callable(connection.ops.adapt_datetimefield_value), why


def test_django_update_query(db: Any) -> None:
    from django.db.models.sql.subqueries import UpdateQuery

    from agents.models import Thread

    why = moved(
        "Django", "UpdateQuery, add_update_values, Query.values", "infra.compiled.CompiledUpdate"
    )
    query = Thread.objects.filter(pk=uuid.uuid4()).query.chain(UpdateQuery)
    query.add_update_values({"lease_owner": "(owner)", "lease_expires_at": None})
    assert [len(v) for v in query.values] == [3, 3], why
    assert [f.name for f, _, _ in query.values] == ["lease_owner", "lease_expires_at"], why
    assert len(query.alias_map) == 1 and not query.related_updates, why
    sql, params = query.get_compiler(using="default").as_sql()
    # The SET clause's parameters first (None is written as NULL, not as a parameter).
    assert sql.startswith("UPDATE") and params[0] == "(owner)" and len(params) == 2, why


def test_django_insert_fields() -> None:
    from agents.models import Event, Thread

    why = moved("Django", "Field.db_returning, Field.has_db_default", "infra.compiled.insert")
    assert Event._meta.pk.db_returning is True, why  # an auto-incremented key
    assert not getattr(Thread._meta.pk, "db_returning", False), why  # a UUID made beforehand
    assert Event._meta.get_field("type").has_db_default() is False, why


def test_django_query_sql(db: Any) -> None:
    from agents.models import Thread

    why = moved("Django", "Query.sql_with_params", "infra.compiled.sql_of")
    sql, params = (
        Thread.objects.filter(external_run_id="x").values("pk")[:3].query.sql_with_params()
    )
    assert isinstance(sql, str) and "LIMIT" in sql.upper() and list(params) == ["x"], why


def test_django_model_backend_cache() -> None:
    from django.contrib.auth.backends import ModelBackend
    from django.contrib.auth.models import User

    # A user whose cache is filled is never read from the database (pytest-django refuses
    # database access here, so a renamed cache fails loudly).
    user = User(username="someone", is_active=True)
    user._perm_cache = {"agents.view_thread"}
    found = ModelBackend().get_all_permissions(user)
    assert found == {"agents.view_thread"}, moved(
        "Django", "ModelBackend's _perm_cache", "access.permbackend.remember_permissions"
    )


def test_django_postgresql_backend_hooks() -> None:
    from django.db.backends.postgresql import base, operations
    from django.db.models import JSONField

    why = moved(
        "Django",
        "postgresql DatabaseWrapper.pool, DatabaseOperations.adapt_json_value",
        "infra.postgresql",
    )
    assert isinstance(inspect.getattr_static(base.DatabaseWrapper, "pool"), property), why
    adapt = operations.DatabaseOperations.adapt_json_value
    assert parameters(adapt) == ["self", "value", "encoder"], why
    assert "adapt_json_value(value, self.encoder)" in inspect.getsource(
        JSONField.get_db_prep_value
    ), why


# asgiref, daphne -------------------------------------------------------------------------


def test_asgiref_records_the_loop_a_thread_serves() -> None:
    from asgiref.sync import sync_to_async

    from infra.aio import in_server_thread

    why = moved("asgiref", "SyncToAsync.threadlocal.main_event_loop_pid", "infra.aio")

    async def main() -> bool:
        return await sync_to_async(in_server_thread, thread_sensitive=False)()

    assert asyncio.run(main()) is True, why
    elsewhere: list[bool] = []
    t = threading.Thread(target=lambda: elsewhere.append(in_server_thread()))
    t.start()
    t.join()
    assert elsewhere == [False], why


def test_asgiref_wsgi_instance_leaves_the_answer_on_itself() -> None:
    from asgiref.wsgi import WsgiToAsgiInstance

    why = moved(
        "asgiref",
        "WsgiToAsgiInstance: __call__ awaiting run_wsgi_app, build_environ, what "
        "start_response keeps, sync_send",
        "gateway.asgi._Request",
    )
    call = inspect.getsource(WsgiToAsgiInstance.__call__)
    assert "self.sync_send = AsyncToSync(send)" in call, why
    assert "await self.run_wsgi_app(body)" in call, why
    assert parameters(WsgiToAsgiInstance.build_environ) == ["self", "scope", "body"], why
    instance = WsgiToAsgiInstance(None)
    instance.start_response("200 OK", [("Content-Length", "2")])
    assert instance.response_start == {
        "type": "http.response.start",
        "status": 200,
        "headers": [(b"content-length", b"2")],
    }, why
    assert (instance.response_content_length, instance.response_started) == (2, False), why


def test_daphne_builds_requests_from_its_module_global() -> None:
    from daphne import http_protocol
    from twisted.web import http

    import gateway.asgi

    why = moved("daphne", "http_protocol.WebRequest, read by HTTPFactory", "gateway.asgi")
    assert "parsePOSTFormSubmission" in parameters(http.Request.__init__), why
    protocol = http_protocol.HTTPFactory(SimpleNamespace()).buildProtocol(None)
    assert protocol.requestFactory is gateway.asgi._WebRequest, why
    # daphne's own request hands its keyword arguments on to Twisted's.
    init = inspect.signature(gateway.asgi._WebRequest.__bases__[0].__init__)
    assert any(p.kind is p.VAR_KEYWORD for p in init.parameters.values()), why


# Celery, kombu -------------------------------------------------------------------------------


def test_celery_django_fixup_reads_db_reuse_max(monkeypatch: pytest.MonkeyPatch) -> None:
    from celery.fixups.django import DjangoWorkerFixup

    from gateway.celery import app

    why = moved("celery", "CELERY_DB_REUSE_MAX (DjangoWorkerFixup)", "gateway.celery")
    fixup = DjangoWorkerFixup(app)
    assert fixup.db_reuse_max == 2**62, why
    closed: list[bool] = []
    monkeypatch.setattr(fixup, "_close_database", lambda: closed.append(True))
    for _ in range(3):
        fixup.close_database()
    assert closed == [], why


def test_kombu_filesystem_channel() -> None:
    from kombu.transport import filesystem, virtual

    why = moved(
        "kombu",
        "the filesystem Channel's _put, _queue_bind, _delete, _exchange_file, control_folder",
        "infra.broker.Channel",
    )
    base = filesystem.Channel
    assert parameters(base._put) == ["self", "queue", "payload", "kwargs"], why
    bind = ["self", "exchange", "routing_key", "pattern", "queue"]
    assert parameters(base._queue_bind) == bind, why
    delete = ["self", "queue", "exchange", "routing_key", "pattern"]
    assert parameters(base._delete)[:5] == delete, why
    # infra.broker skips the filesystem _delete for the virtual channel's own.
    assert parameters(virtual.Channel._delete) == ["self", "queue", "args", "kwargs"], why
    assert parameters(base._exchange_file) == ["self", "exchange"], why
    for name in ("control_folder", "data_folder_out"):  # (cached) properties
        assert hasattr(inspect.getattr_static(base, name), "__get__"), why
    assert filesystem.exchange_queue_t._fields == ("routing_key", "pattern", "queue"), why
    binds = inspect.getsource(virtual.Channel.queue_bind)
    assert "self._queue_bind(exchange, *meta)" in binds, why


def test_kombu_redis_channel_makes_its_clients_in_one_place() -> None:
    from kombu.transport import redis as kombu_redis

    why = moved("kombu", "the Redis Channel's _create_client", "infra.broker.RedisChannel")
    channel = kombu_redis.Channel
    assert parameters(channel._create_client) == ["self", "asynchronous"], why
    assert "self._create_client()" in inspect.getsource(channel.conn_or_acquire), why
    assert isinstance(inspect.getattr_static(channel, "pool"), property), why


# channels_redis, psycopg_pool ----------------------------------------------------------------


def test_channels_redis_pubsub_naming() -> None:
    from channels_redis.pubsub import RedisPubSubChannelLayer, RedisPubSubLoopLayer
    from channels_redis.utils import _consistent_hash

    why = moved(
        "channels_redis",
        "RedisPubSubChannelLayer._kwargs, _consistent_hash, the group channel's name",
        "infra.pubsub",
    )
    hosts = ["redis://127.0.0.1:1/0", "redis://127.0.0.1:2/0"]
    layer = RedisPubSubChannelLayer(hosts=hosts, prefix="p")
    assert layer._kwargs == {"hosts": hosts, "prefix": "p"}, why
    default = inspect.signature(RedisPubSubLoopLayer).parameters["prefix"].default
    assert default == "asgi", why
    loop_layer = RedisPubSubLoopLayer(**layer._kwargs, channel_layer=layer)  # connects to none
    name = loop_layer._get_group_channel_name("events")
    assert name == "p__group__events", why
    assert loop_layer._get_shard(name) is loop_layer._shards[_consistent_hash(name, 2)], why
    assert "self.channel_layer.serialize(message)" in inspect.getsource(
        RedisPubSubLoopLayer.group_send
    ), why


def test_psycopg_pool_keeps_its_check_in_an_attribute() -> None:
    from psycopg_pool import ConnectionPool

    why = moved("psycopg_pool", "ConnectionPool._check", "infra.postgresql (infra.dbpool.checker)")
    pool = ConnectionPool("", open=False, check=ConnectionPool.check_connection)
    assert pool._check is ConnectionPool.check_connection, why
    seen: list[Any] = []
    pool._check = seen.append
    pool._check_connection("a connection")
    assert seen == ["a connection"], why


def test_psycopg_pool_backoff_is_a_class_attribute() -> None:
    from psycopg_pool import base, pool

    why = moved("psycopg_pool", "AttemptWithBackoff.DELAY_BACKOFF", "infra.dbpool")
    assert pool.AttemptWithBackoff is base.AttemptWithBackoff, why
    attempt = base.AttemptWithBackoff(timeout=1000)
    attempt.update_delay(0)
    first = attempt.delay
    attempt.update_delay(0)
    assert attempt.delay == pytest.approx(first * base.AttemptWithBackoff.DELAY_BACKOFF), why


# mcp ---------------------------------------------------------------------------------------


def test_mcp_client_session_takes_a_listing_it_did_not_fetch() -> None:
    import anyio
    import mcp_types as types
    from mcp.client.session import ClientSession

    from mcp_gateway import client_priming

    why = moved("mcp", "ClientSession._absorb_tool_listing", "mcp_gateway.client_priming")
    absorb = inspect.signature(ClientSession._absorb_tool_listing).parameters
    assert list(absorb) == ["self", "result", "complete"], why
    assert absorb["complete"].kind is inspect.Parameter.KEYWORD_ONLY, why
    to_server, from_client = anyio.create_memory_object_stream[Any](1)
    session = ClientSession(from_client, to_server)

    async def listing(**_: Any) -> Any:
        raise AssertionError(why)  # the session asked the upstream for what it was handed

    session.list_tools = listing  # type: ignore[method-assign]
    schema = {"type": "object", "properties": {"n": {"type": "integer"}}, "required": ["n"]}
    client_priming.know_tools(
        session, [types.Tool(name="count", input_schema={"type": "object"}, output_schema=schema)]
    )

    async def check() -> None:
        # The result is checked against the handed schema, with no tools/list of its own.
        good = types.CallToolResult(content=[], structured_content={"n": 1})
        await session.validate_tool_result("count", good)
        bad = types.CallToolResult(content=[], structured_content={"n": "one"})
        with pytest.raises(RuntimeError):
            await session.validate_tool_result("count", bad)

    anyio.run(check)


# The list itself -----------------------------------------------------------------------------

ROOT = Path(__file__).resolve().parent.parent
# Where a statement may be compiled, and its sentinel values written.
STATEMENTS = {
    "agents/statements.py",
    "agents/request_statements.py",
    "access/statements.py",
    "mcp_gateway/statements.py",
    "infra/compiled.py",
}


def test_every_reach_listed_in_architecture_has_its_tripwire() -> None:
    text = (ROOT / "ARCHITECTURE.md").read_text(encoding="utf-8")
    section = text.split("## Reaches into libraries' private names", 1)[1].split("\n## ", 1)[0]
    listed = set(re.findall(r"`(test_\w+)`", section))
    tripwires = {
        name
        for name in globals()
        if name.startswith("test_") and not name.startswith(("test_every_", "test_no_compiled_"))
    }
    assert listed == tripwires


def test_no_compiled_statement_outside_the_statements_modules() -> None:
    found = []
    for package in PACKAGES:  # every package pyproject.toml lists (tests/test_architecture.py)
        for path in (ROOT / package).rglob("*.py"):
            where = path.relative_to(ROOT).as_posix()
            if where in STATEMENTS or "migrations" in path.parts:
                continue
            for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
                if (
                    isinstance(node, ast.Call)
                    and isinstance(node.func, ast.Name)
                    and node.func.id in ("Compiled", "CompiledUpdate")
                ):
                    found.append(f"{where}:{node.lineno}")
    assert found == [], "compile statements in a statements module (ARCHITECTURE.md, the rules)"
