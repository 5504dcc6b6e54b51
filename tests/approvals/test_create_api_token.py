"""`manage.py create_api_token USERNAME`: a bearer token printed once and stored hashed."""

import hashlib
from io import StringIO
from typing import Any

import pytest
from django.core.management import call_command
from django.core.management.base import CommandError
from django.test import Client

from access.models import ApiToken


def create_token(*args: str) -> str:
    out = StringIO()
    call_command("create_api_token", *args, stdout=out)
    return out.getvalue().strip()


class CreateApiTokenTestCase:
    def test_it_prints_a_token_that_authenticates_as_the_user(self, users: dict[str, Any]) -> None:
        raw = create_token("bob")
        r = Client().get("/api/suspensions", headers={"Authorization": f"Bearer {raw}"})
        assert r.status_code == 200
        r = Client().post(
            "/api/threads",
            {"agent": "nobody", "message": "go"},
            content_type="application/json",
            headers={"Authorization": f"Bearer {raw}"},
        )
        assert r.status_code == 400  # past authentication and permission, stopped by validation

    def test_only_the_digest_is_stored(self, users: dict[str, Any]) -> None:
        raw = create_token("alice", "--name", "laptop")
        [token] = ApiToken.objects.filter(user=users["reviewer"])
        assert token.name == "laptop"
        assert token.digest == hashlib.sha256(raw.encode()).hexdigest()
        assert raw.startswith(token.prefix) and len(token.prefix) < len(raw) // 2
        stored = [str(v) for v in ApiToken.objects.values_list(flat=False).get()]
        assert raw not in stored

    def test_each_call_makes_a_new_token_and_both_work(self, users: dict[str, Any]) -> None:
        first, second = create_token("alice"), create_token("alice")
        assert first != second
        for raw in (first, second):
            r = Client().get("/api/events", headers={"Authorization": f"Bearer {raw}"})
            assert r.status_code == 200

    def test_a_token_for_an_outsider_authenticates_but_grants_nothing(
        self, users: dict[str, Any]
    ) -> None:
        raw = create_token("mallory")
        r = Client().get("/api/suspensions", headers={"Authorization": f"Bearer {raw}"})
        assert r.status_code == 403

    def test_an_unknown_user_is_an_error(self, users: dict[str, Any]) -> None:
        with pytest.raises(CommandError, match="nobody"):
            create_token("nobody")
        assert not ApiToken.objects.exists()
