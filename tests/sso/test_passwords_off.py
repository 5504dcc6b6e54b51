"""OIDC_ONLY: no password signs anyone in, on the login page, the admin's or any other
authenticate(), but a break-glass administrator's; the provider's sign-in goes on."""

from typing import Any

import pytest
from django.contrib.auth import authenticate
from django.contrib.auth.models import User
from django.test import Client


@pytest.fixture
def passwords_off(provider: Any, settings: Any, users: Any) -> None:
    settings.OIDC_ONLY = True
    settings.OIDC_BREAK_GLASS = ["admin"]
    User.objects.filter(username="alice").update(is_staff=True)


def signed_in(client: Client) -> str | None:
    user_id = client.session.get("_auth_user_id")
    return User.objects.get(pk=user_id).username if user_id else None


def test_the_login_form_refuses_a_password_and_says_why(passwords_off: None) -> None:
    client = Client()
    answer = client.post("/login/", {"username": "alice", "password": "alice-password-1"})
    page = answer.content.decode()
    assert answer.status_code == 200
    assert "Passwords are turned off here: sign in with Stand-in ID." in page
    assert signed_in(client) is None


def test_the_admin_login_refuses_a_password(passwords_off: None) -> None:
    client = Client()
    answer = client.post(
        "/admin/login/", {"username": "alice", "password": "alice-password-1", "next": "/admin/"}
    )
    assert answer.status_code == 200 and signed_in(client) is None


def test_no_other_path_takes_a_password(passwords_off: None) -> None:
    assert authenticate(None, username="alice", password="alice-password-1") is None
    assert authenticate(None, username="admin", password="admin-password-1") is not None


def test_the_break_glass_admin_signs_in_with_a_password(passwords_off: None) -> None:
    client = Client()
    answer = client.post("/login/", {"username": "admin", "password": "admin-password-1"})
    assert answer.status_code == 302 and answer["Location"] == "/"
    assert signed_in(client) == "admin"
    admin = Client()
    admin.post("/admin/login/", {"username": "admin", "password": "admin-password-1"})
    assert signed_in(admin) == "admin"


def test_the_login_page_leads_with_the_provider(passwords_off: None) -> None:
    page = Client().get("/login/").content.decode()
    assert "Sign in with Stand-in ID" in page
    assert '<details class="break-glass">' in page  # the password form, folded away


def test_the_provider_still_signs_people_in(
    passwords_off: None, provider: Any, sign_in: Any
) -> None:
    provider.add("dana", groups=["reviewers"])
    client = Client()
    assert sign_in(client, "dana").status_code == 302
    assert signed_in(client) == "dana"


def test_passwords_stay_on_by_default(provider: Any, users: Any) -> None:
    client = Client()
    client.post("/login/", {"username": "alice", "password": "alice-password-1"})
    assert signed_in(client) == "alice"
    wrong = Client().post("/login/", {"username": "alice", "password": "wrong"})
    assert "That username and password do not match. Try again." in wrong.content.decode()
