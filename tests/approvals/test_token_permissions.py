"""A token's user's permissions, own and through groups, read with the token (access.auth):
each request sees them as they are then, and on PostgreSQL the token, its user and their
permissions are one statement."""

from typing import Any

import pytest
from django.contrib.auth.models import Group, Permission
from django.db import connection
from django.test.utils import CaptureQueriesContext

from tests.conftest import Api

VIEW_THREAD = {"content_type__app_label": "agents", "codename": "view_thread"}


@pytest.mark.django_db
def test_own_and_group_permissions_apply_and_a_removed_one_stops_at_the_next_request(
    users: dict[str, Any],
) -> None:
    operator, outsider = users["operator"], users["outsider"]
    view = Permission.objects.get(**VIEW_THREAD)
    assert Api(operator).get("/api/threads").status_code == 200  # their own permission
    assert Api(outsider).get("/api/threads").status_code == 403
    readers = Group.objects.create(name="readers")
    readers.permissions.add(view)
    outsider.groups.add(readers)
    caller = Api(outsider)
    assert caller.get("/api/threads").status_code == 200  # through the group
    readers.permissions.remove(view)
    assert caller.get("/api/threads").status_code == 403  # the same token, the next request
    operator.user_permissions.remove(view)
    assert Api(operator).get("/api/threads").status_code == 403


@pytest.mark.django_db
def test_a_superuser_token_has_every_permission(users: dict[str, Any]) -> None:
    assert Api(users["admin"]).get("/api/threads").status_code == 200


@pytest.mark.django_db
def test_the_token_its_user_and_their_permissions_are_one_statement(
    users: dict[str, Any],
) -> None:
    if connection.vendor != "postgresql":
        pytest.skip("SQLite has no arrays: its backend reads the permissions in a statement")
    caller = Api(users["operator"])
    caller.get("/api/threads")  # the token's first use is recorded (last_used_at)
    with CaptureQueriesContext(connection) as queries:
        assert caller.get("/api/threads").status_code == 200
    reading = [q["sql"] for q in queries.captured_queries if "auth_permission" in q["sql"]]
    assert len(reading) == 1, reading
    assert '"approvals_apitoken"' in reading[0]
