"""Invariant 2: approve, reject, timeout and cancel race on one suspension and exactly one wins;
every loser learns the recorded outcome. Each contender runs on its own database connection."""

import threading
from collections.abc import Callable
from datetime import timedelta
from typing import Any

import pytest
from django.db import connection
from django.utils import timezone

from agents import cancelling, deadlines, decisions
from agents.models import Event, Suspension, Thread
from tests.approvals import state

OUTCOME_EVENTS = ("SUSPENSION_DECIDED", "SUSPENSION_TIMEOUT", "SUSPENSION_CANCELLED")


def race(contenders: list[Callable[[], Any]]) -> list[Any]:
    """Start every contender at once; what each returned, or the exception it raised."""
    barrier = threading.Barrier(len(contenders))
    results: list[Any] = [None] * len(contenders)

    def run(i: int) -> None:
        try:
            barrier.wait()
            results[i] = contenders[i]()
        except Exception as e:  # the assertion below reports it
            results[i] = e
        finally:
            connection.close()

    threads = [threading.Thread(target=run, args=(i,)) for i in range(len(contenders))]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return results


class DecisionRaceTestCase:
    @pytest.fixture(autouse=True)
    def setup(self, users: dict[str, Any], transactional_db: Any) -> None:
        self.users = users

    def outcome_events(self, s: Suspension) -> list[str]:
        return list(
            Event.objects.filter(suspension=s, type__in=OUTCOME_EVENTS).values_list(
                "type", flat=True
            )
        )

    @pytest.mark.parametrize("round_", range(3))
    def test_approve_reject_timeout_and_cancel_have_one_winner(self, round_: int) -> None:
        alice, bob = self.users["reviewer"], self.users["teammate"]
        thread, [s] = state.suspended(self.users["operator"])
        later = timezone.now() + timedelta(hours=1)
        contenders: list[Callable[[], Any]] = [
            lambda: decisions.decide(s, alice, {"approved": True}),
            lambda: decisions.decide(s, bob, {"approved": False, "reason": "no"}),
            lambda: decisions.decide(s, alice, {"approved": True, "modifiedArgs": state.TRANSFER}),
            lambda: deadlines.expire_overdue(now=later),
            lambda: cancelling.cancel_thread(thread.pk, bob),
        ]
        order = contenders[round_:] + contenders[:round_]
        results = race(order)
        errors = [r for r in results if isinstance(r, Exception)]
        assert errors == [], errors

        s.refresh_from_db()
        assert s.status != Suspension.Status.PENDING
        assert len(self.outcome_events(s)) == 1, self.outcome_events(s)
        winners = [r for r in results if isinstance(r, decisions.Taken) and r.created]
        losers = [r for r in results if isinstance(r, decisions.Taken) and not r.created]
        if s.status in (Suspension.Status.APPROVED, Suspension.Status.REJECTED):
            assert len(winners) == 1
        else:
            assert winners == []
        # Each losing decision was told what had been recorded instead.
        for lost in losers:
            assert lost.suspension.status == s.status
            assert lost.suspension.decided_by_id == s.decided_by_id
        # The cancel ran too, whoever won the suspension.
        assert Thread.objects.get(pk=thread.pk).status == Thread.Status.CANCELLED

    def test_twenty_conflicting_decisions_record_one(self) -> None:
        alice, bob = self.users["reviewer"], self.users["teammate"]
        thread, [s] = state.suspended(self.users["operator"])
        results = race(
            [
                (lambda: decisions.decide(s, alice, {"approved": True}))
                if i % 2
                else (
                    lambda i=i: decisions.decide(s, bob, {"approved": False, "reason": f"no {i}"})
                )
                for i in range(20)
            ]
        )
        assert not [r for r in results if isinstance(r, Exception)], results
        assert sum(r.created for r in results) == 1
        s.refresh_from_db()
        assert self.outcome_events(s) == ["SUSPENSION_DECIDED"]
        assert {r.suspension.status for r in results} == {s.status}
        assert Thread.objects.get(pk=thread.pk).status == Thread.Status.RUNNING
