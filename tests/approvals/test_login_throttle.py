"""Login throttling: a username from one address is locked out after AXES_FAILURE_LIMIT."""

from typing import Any

import pytest
from django.test import Client

from tests.approvals import state

ALICE = "alice-password-1"  # tests/conftest.py's users


def attempt(path: str, username: str, password: str, ip: str = "203.0.113.7") -> Any:
    # A fresh client each time: no session, so every attempt is an anonymous login form post.
    return Client(REMOTE_ADDR=ip).post(path, {"username": username, "password": password})


def locked(r: Any) -> bool:
    return r.status_code == 429 and "Too many login attempts" in r.content.decode()


@pytest.mark.parametrize("path", ["/login/", "/admin/login/"])
class LoginThrottleTestCase:
    @pytest.fixture(autouse=True)
    def setup(self, users: dict[str, Any], settings: Any, path: str) -> None:
        self.limit = settings.AXES_FAILURE_LIMIT
        if path.startswith("/admin/"):
            # The admin's login takes staff only; a success there is what these tests check.
            for who in ("reviewer", "teammate"):
                users[who].is_staff = True
                users[who].save()

    def test_it_locks_out_after_the_limit_and_refuses_even_the_right_password(
        self, path: str
    ) -> None:
        answers = [attempt(path, "alice", f"wrong-{i}") for i in range(30)]
        # Before the limit: the form again, saying the password is wrong.
        assert all(r.status_code == 200 for r in answers[: self.limit - 1])
        assert not any(locked(r) for r in answers[: self.limit - 1])
        # From the limit on: 429 with the lockout message.
        assert all(locked(r) for r in answers[self.limit :]), [r.status_code for r in answers]
        assert "alice" in answers[-1].content.decode()
        right = attempt(path, "alice", ALICE)
        assert locked(right)
        assert "_auth_user_id" not in right.client.session

    def test_another_user_from_the_same_address_is_not_locked(self, path: str) -> None:
        for i in range(self.limit + 2):
            attempt(path, "alice", f"wrong-{i}")
        r = attempt(path, "bob", "bob-password-1")
        assert r.status_code == 302 and not locked(r)

    def test_the_same_user_from_another_address_is_not_locked(self, path: str) -> None:
        for i in range(self.limit + 2):
            attempt(path, "alice", f"wrong-{i}")
        assert locked(attempt(path, "alice", ALICE))
        r = attempt(path, "alice", ALICE, ip="198.51.100.9")
        assert r.status_code == 302 and not locked(r)

    def test_the_lockout_ends_after_the_cooloff(self, path: str, time_machine: Any) -> None:
        time_machine.move_to("2026-01-05 09:00:00+00:00", tick=False)
        for i in range(self.limit):
            attempt(path, "alice", f"wrong-{i}")
        assert locked(attempt(path, "alice", ALICE))
        time_machine.move_to("2026-01-05 09:16:00+00:00", tick=False)
        assert attempt(path, "alice", ALICE).status_code == 302

    def test_a_success_before_the_limit_starts_the_count_again(self, path: str) -> None:
        for i in range(self.limit - 1):
            attempt(path, "alice", f"wrong-{i}")
        assert attempt(path, "alice", ALICE).status_code == 302
        for i in range(self.limit - 1):
            assert not locked(attempt(path, "alice", f"again-{i}"))


class OtherLoginsTestCase:
    def test_api_tokens_and_test_logins_still_work_while_a_user_is_locked(
        self, users: dict[str, Any], api: Any, settings: Any
    ) -> None:
        for i in range(settings.AXES_FAILURE_LIMIT + 1):
            attempt("/login/", "alice", f"wrong-{i}")
        state.agent("payer")
        # A bearer token is not a password login: the lockout is about guessing passwords.
        assert api("reviewer").get("/api/suspensions").status_code == 200
        client = Client()
        assert client.login(username="bob", password="bob-password-1")
        assert client.get("/").status_code == 200
        client = Client()
        client.force_login(users["reviewer"])
        assert client.get("/").status_code == 200
