"""The revocation counter moves in the transaction of every kind of revocation, whatever made
the change, and not on the writes a busy gateway makes all the time; the hub's clearances
check credentials once per move of the counter, not once per socket or batch."""

import asyncio
from datetime import timedelta
from typing import Any

import pytest
from django.contrib.auth.models import User
from django.contrib.sessions.models import Session
from django.db import transaction
from django.test import Client
from django.utils import timezone

from access import tokens
from access.clearance import Clearances
from access.models import ApiToken, digest
from access.revocation import Credential, revocations
from tests.approvals.test_consumer import in_thread


class Holder:
    def __init__(self, credential: Credential) -> None:
        self.credential = credential
        self.revoked = False

    async def revoke(self) -> None:
        self.revoked = True


@pytest.mark.django_db(transaction=True)
class RevocationCounterTestCase:
    @pytest.fixture(autouse=True)
    def setup(self, users: dict[str, Any]) -> None:
        self.user = users["reviewer"]
        self.token, self.raw = ApiToken.issue(self.user, "laptop")

    def moves(self, change: Any) -> bool:
        before = revocations()
        change()
        return revocations() != before

    def test_it_moves_on_every_kind_of_revocation(self) -> None:
        browser = Client()
        browser.force_login(self.user)
        other, _ = ApiToken.issue(self.user, "other")
        soon = timezone.now() + timedelta(minutes=1)
        assert self.moves(lambda: tokens.revoke(self.token))
        assert self.moves(lambda: ApiToken.objects.filter(pk=other.pk).update(expires_at=soon))
        assert self.moves(other.delete)
        assert self.moves(lambda: browser.post("/logout/"))
        assert self.moves(lambda: User.objects.filter(pk=self.user.pk).update(is_active=False))
        assert self.moves(User.objects.get(username="bob").delete)

    def test_it_moves_with_the_revocation_and_not_before_it_commits(self) -> None:
        with transaction.atomic():
            before = revocations()
            User.objects.filter(pk=self.user.pk).update(is_active=False)
            assert revocations() == before + 1  # the same transaction sees its own change
            transaction.set_rollback(True)
        assert revocations() == before

    def test_it_stays_still_on_everyday_writes(self) -> None:
        browser = Client()
        before = revocations()
        assert browser.post(
            "/login/", {"username": "alice", "password": "alice-password-1"}
        ).status_code in (200, 302)
        ApiToken.objects.filter(pk=self.token.pk).update(last_used_at=timezone.now())
        self.user.save()
        Session.objects.update(expire_date=timezone.now() + timedelta(days=30))
        assert revocations() == before

    def test_it_checks_credentials_once_per_move_of_the_counter(self) -> None:
        clearances = Clearances()
        token = Credential(self.user.pk, token_digest=digest(self.raw))
        holders = [Holder(token) for _ in range(3)] + [Holder(Credential(self.user.pk))]

        async def scenario() -> list[int]:
            checks = []
            for _ in range(3):  # batches with no revocation between them
                assert await clearances.admit(await in_thread(revocations), holders) == holders
                checks.append(clearances.checks)
            await in_thread(lambda: tokens.revoke(self.token))
            admitted = await clearances.admit(await in_thread(revocations), holders)
            checks.append(clearances.checks)
            assert admitted == holders[3:]
            return checks

        assert asyncio.run(scenario()) == [1, 1, 1, 2]
        assert [h.revoked for h in holders] == [True, True, True, False]
