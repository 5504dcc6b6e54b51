"""Two first sign-ins of one person at the same moment (two tabs, a double click) make one user:
the identity's unique key decides, and the loser signs in as the winner's user."""

import threading
from typing import Any

from django import db
from django.contrib.auth.models import User

from agents.models import Event
from sso import accounts
from sso.claims import Person
from sso.models import Identity

DANA = Person(
    issuer="https://id.example.com",
    subject="sub-dana",
    username="dana",
    email="dana@example.com",
    first_name="Dana",
    last_name="",
    provider_groups=("reviewers",),
)


def test_two_first_sign_ins_at_once_make_one_user(transactional_db: Any) -> None:
    start = threading.Barrier(2)
    signed_in: list[int] = []

    def sign_in() -> None:
        try:
            start.wait()
            signed_in.append(accounts.sign_in(DANA).pk)
        finally:
            db.connection.close()

    threads = [threading.Thread(target=sign_in) for _ in range(2)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert len(signed_in) == 2 and signed_in[0] == signed_in[1]
    assert User.objects.filter(username__startswith="dana").count() == 1
    assert Identity.objects.count() == 1
    assert Event.objects.filter(type="SSO_USER_CREATED").count() == 1
