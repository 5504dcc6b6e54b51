"""The demo accounts `make run` makes: each run's token replaces the last one, and each
account can do what its printed line says."""

import re
from io import StringIO
from typing import Any

import pytest
from django.contrib.auth.models import User
from django.core.management import call_command
from django.test import Client

from agents.models import Event


@pytest.fixture(autouse=True)
def fast_hasher(settings: Any) -> None:
    settings.PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]


def demo(command: str) -> str:
    out = StringIO()
    call_command(command, stdout=out)
    return out.getvalue()


def token_of(printed: str) -> str:
    return re.search(r"Token:\s+(gw_\S+)", printed).group(1)


def answers(token: str) -> int:
    return Client().get("/api/threads", headers={"Authorization": f"Bearer {token}"}).status_code


def test_each_run_revokes_the_previous_demo_token(db: Any) -> None:
    first = demo("demo_reviewer")
    assert answers(token_of(first)) == 200 and "revoked" not in first
    second = demo("demo_reviewer")
    assert "previous demo token revoked" in second
    assert answers(token_of(first)) == 401
    assert answers(token_of(second)) == 200
    [revoked] = Event.objects.filter(type="TOKEN_REVOKED")
    assert revoked.payload["name"] == "make run" and revoked.payload["user"] == "reviewer"


def test_a_token_made_by_hand_for_the_reviewer_stays_valid(db: Any) -> None:
    demo("demo_reviewer")
    out = StringIO()
    call_command("create_api_token", "reviewer", "--name", "mine", stdout=out)
    mine = re.search(r"gw_\S+", out.getvalue()).group(0)
    demo("demo_reviewer")
    assert answers(mine) == 200


def test_what_each_account_is_said_to_do_it_can(db: Any) -> None:
    reviewer = demo("demo_reviewer")
    admin = demo("demo_admin")
    assert "no /admin/" in reviewer and "/admin/" in admin and "/audit/" in admin
    login, password = re.search(r"Login:\s+(\S+) / (\S+)", reviewer).groups()
    client = Client()
    assert client.login(username=login, password=password)
    assert client.get("/").status_code == 200
    assert client.get("/admin/").status_code == 302  # to the admin's login: not staff
    assert client.get("/audit/").status_code == 403
    login, password = re.search(r"Admin:\s+(\S+) / (\S+)", admin).groups()
    client = Client()
    assert client.login(username=login, password=password)
    assert client.get("/admin/").status_code == 200
    assert client.get("/audit/").status_code == 200
    assert User.objects.get(username=login).is_staff
