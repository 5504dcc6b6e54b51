"""infra.compiled: a queryset compiled once gives, for other values, what the ORM gives."""

import uuid
from datetime import timedelta
from typing import Any
from unittest.mock import patch

import pytest
from django.contrib.auth.models import User
from django.db import connection
from django.db.models.sql.compiler import SQLUpdateCompiler
from django.test.utils import CaptureQueriesContext
from django.utils import timezone

from access.models import ApiToken
from agents.models import AgentDefinition, StackFrame, Thread
from infra.compiled import Compiled, CompiledUpdate, fields, insert

FIELDS = ("name", "scopes", "expires_at", "user__username", "user__is_active")


def orm(name: str, user_id: int) -> list[tuple[Any, ...]]:
    return list(
        ApiToken.objects.filter(name=name, user_id=user_id).values_list(*FIELDS).order_by("pk")
    )


@pytest.mark.django_db
def test_rows_equal_the_orms_for_each_value_with_columns_converted(users: Any) -> None:
    alice, bob = users["reviewer"], users["teammate"]
    soon = timezone.now() + timedelta(days=3)
    ApiToken.issue(alice, "ci", scopes=["runs", "decisions"], expires_at=soon)
    ApiToken.issue(alice, "ci", scopes=["runs"])
    ApiToken.issue(bob, "laptop", scopes=["decisions"])
    compiled = Compiled(
        lambda name, user: (
            ApiToken.objects.filter(name=name, user_id=user).values_list(*FIELDS).order_by("pk")
        ),
        "(a name)",
        -1,
    )
    for name, user in (("ci", alice.pk), ("laptop", bob.pk), ("ci", bob.pk)):
        assert compiled.rows(name, user) == orm(name, user)
    got = compiled.rows("ci", alice.pk)
    # Converted as the ORM converts them, on SQLite too: a list from JSON, an aware datetime.
    assert got[0][1] == ["decisions", "runs"] and got[0][2] == soon
    # Compiled once: later calls make exactly one statement, the same SQL each time.
    with CaptureQueriesContext(connection) as queries:
        compiled.rows("laptop", bob.pk)
        compiled.rows("ci", alice.pk)
    assert (
        len(queries) == 2
        and queries[0]["sql"].split("WHERE")[0] == queries[1]["sql"].split("WHERE")[0]
    )


@pytest.mark.django_db
def test_a_value_the_orm_would_change_is_refused_when_prepared() -> None:
    # `__icontains` wraps the value in %...%: the sentinel does not reach the SQL unchanged,
    # so running it with another value would not be the ORM's query.
    compiled = Compiled(
        lambda name: User.objects.filter(username__icontains=name).values_list("pk"), "(x)"
    )
    with pytest.raises(ValueError, match="were changed"):
        compiled.rows("alice")


@pytest.mark.django_db
def test_uuid_values_and_whole_instances(users: Any) -> None:
    token, _ = ApiToken.issue(users["reviewer"], "ci")
    by_user = Compiled(
        lambda pk, user: ApiToken.objects.filter(pk=pk, user_id=user).values_list(
            *fields(ApiToken)
        ),
        -1,
        -2,
    )
    [got] = by_user.instances(ApiToken, token.pk, users["reviewer"].pk)
    assert got == token and got.digest == token.digest and got.scopes == token.scopes
    assert got.created_at == token.created_at and not got._state.adding
    assert by_user.instances(ApiToken, token.pk, users["teammate"].pk) == []
    # A UUID goes to SQLite as its hex string and to PostgreSQL as a UUID: both match.
    thread = Thread.objects.create(agent=AgentDefinition.objects.create(name="a", model="m"))
    by_id = Compiled(
        lambda pk: Thread.objects.filter(pk=pk).values_list("pk", "agent__name"), uuid.UUID(int=1)
    )
    assert by_id.rows(thread.pk) == [(thread.pk, "a")]
    assert by_id.rows(str(thread.pk)) == [(thread.pk, "a")]  # as a string, as UUIDField takes
    assert by_id.rows(uuid.uuid4()) == []


# CompiledUpdate -------------------------------------------------------------------------

AT = timezone.now().replace(year=2001)


def claim() -> CompiledUpdate:
    return CompiledUpdate(
        lambda thread, owner, until, now: (
            Thread.objects.filter(pk=thread, status="running").exclude(lease_expires_at__gt=now),
            {"lease_owner": owner, "lease_expires_at": until, "runnable_since": now},
        ),
        uuid.UUID(int=1),
        "(owner)",
        AT,
        AT + timedelta(microseconds=1),
    )


@pytest.mark.django_db
def test_an_update_compiled_once_writes_what_the_orms_writes() -> None:
    agent = AgentDefinition.objects.create(name="a", model="m")
    mine, other = (Thread.objects.create(agent=agent, status="running") for _ in range(2))
    now = timezone.now()
    compiled = claim()

    assert compiled.run(mine.pk, "me", now + timedelta(seconds=10), now) == 1
    # The same update through the ORM, on the other row: both rows end the same.
    assert (
        Thread.objects.filter(pk=other.pk, status="running")
        .exclude(lease_expires_at__gt=now)
        .update(lease_owner="me", lease_expires_at=now + timedelta(seconds=10), runnable_since=now)
        == 1
    )
    columns = ("lease_owner", "lease_expires_at", "runnable_since")
    got = Thread.objects.filter(pk__in=[mine.pk, other.pk]).values_list(*columns)
    assert len(set(got)) == 1 and got[0] == ("me", now + timedelta(seconds=10), now)
    # The filter's datetime is the run's: a lease still held is not taken, one run out is.
    assert compiled.run(mine.pk, "you", now, now + timedelta(seconds=5)) == 0
    assert compiled.run(str(mine.pk), "you", now, now + timedelta(seconds=11)) == 1
    assert Thread.objects.get(pk=mine.pk).lease_owner == "you"
    # Compiled once: one statement per run, and the ORM's compiler not called again.
    with (
        patch.object(SQLUpdateCompiler, "as_sql", side_effect=AssertionError) as compiling,
        CaptureQueriesContext(connection) as queries,
    ):
        compiled.run(other.pk, "x", now, now + timedelta(seconds=20))
        compiled.run(mine.pk, "y", now, now + timedelta(seconds=20))
    assert len(queries) == 2 and not compiling.called


@pytest.mark.django_db
def test_a_compiled_update_prepares_json_as_its_field_does() -> None:
    agent = AgentDefinition.objects.create(name="a", model="m")
    thread = Thread.objects.create(agent=agent)
    frame = StackFrame.objects.create(thread=thread, agent_name="a", model="m")
    save = CompiledUpdate(
        lambda pk, messages, used: (
            StackFrame.objects.filter(pk=pk),
            {"messages": messages, "tools_used": used, "iteration": 3},
        ),
        -1,
        [{"(messages)": 1}],
        ["(used)"],
    )
    messages = [{"role": "user", "content": [{"type": "text", "text": 'it\'s "quoted" – ünï'}]}]
    assert save.run(frame.pk, messages, ["a", "b"]) == 1
    frame.refresh_from_db()
    assert (frame.messages, frame.tools_used, frame.iteration) == (messages, ["a", "b"], 3)


@pytest.mark.django_db
def test_an_update_the_orm_would_not_write_as_built_is_refused() -> None:
    # A filter across tables is not one UPDATE statement of the row's table.
    across = CompiledUpdate(
        lambda name: (Thread.objects.filter(agent__name=name), {"title": "x"}), "(name)"
    )
    with pytest.raises(ValueError, match="one table"):
        across.run("a")
    # `__icontains` changes the value on its way: the sentinel is not found.
    changed = CompiledUpdate(
        lambda title: (Thread.objects.filter(title__icontains=title), {"error": ""}), "(t)"
    )
    with pytest.raises(ValueError, match="were changed"):
        changed.run("x")


@pytest.mark.django_db
def test_insert_writes_rows_as_save_would() -> None:
    agent = AgentDefinition.objects.create(name="a", model="m")
    thread = Thread(agent=agent, title='it\'s "t"')
    insert([thread])  # a UUID key the row had before
    frames = [
        StackFrame(thread=thread, agent_name="a", model="m", messages=[{"n": n}]) for n in range(3)
    ]
    insert(frames)  # auto-incremented keys, given back in order
    assert not thread._state.adding and thread.created_at is not None
    stored = Thread.objects.get(pk=thread.pk)
    assert (stored.title, stored.status) == (thread.title, "running")
    assert stored.created_at == thread.created_at  # set on the instance, as save sets it
    by_id = {f.pk: f.messages for f in StackFrame.objects.filter(thread=thread)}
    assert by_id == {f.pk: [{"n": n}] for n, f in enumerate(frames)}
