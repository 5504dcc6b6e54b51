"""gateway.compiled: a queryset compiled once gives, for other values, what the ORM gives."""

import uuid
from datetime import timedelta
from typing import Any

import pytest
from django.contrib.auth.models import User
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.utils import timezone

from agents.models import AgentDefinition, Thread
from approvals.models import ApiToken
from gateway.compiled import Compiled, fields

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
