"""A quorum under concurrency (agents.decisions.decide, agents.policy): twenty votes at once, each
on its own database connection, give exactly the outcome the votes call for and one
SUSPENSION_DECIDED. On PostgreSQL the votes really run side by side; the suspension's row lock
is what counts them one at a time."""

from typing import Any

import pytest
from django.contrib.auth.models import Group, User

from access.permissions import REVIEWERS
from agents import decisions, policy
from agents.models import Event, Suspension, Thread, Vote
from tests.agents.test_decision_races import race
from tests.approvals import state


def reviewers(n: int) -> list[User]:
    group = Group.objects.get(name=REVIEWERS)
    made = []
    for i in range(n):
        user = User.objects.create_user(f"reviewer{i:02}")
        user.groups.add(group)
        made.append(user)
    return made


def kinds(s: Suspension) -> list[str]:
    return list(
        Event.objects.filter(
            suspension=s, type__in=["SUSPENSION_VOTED", "SUSPENSION_DECIDED"]
        ).values_list("type", flat=True)
    )


class QuorumRaceTestCase:
    @pytest.fixture(autouse=True)
    def setup(self, users: dict[str, Any], transactional_db: Any) -> None:
        self.users = users

    def suspension(self, quorum: int) -> tuple[Thread, Suspension]:
        thread, [s] = state.suspended(self.users["operator"])
        Suspension.objects.filter(pk=s.pk).update(
            policy={"quorum": quorum, "four_eyes": True, "started_by": "olivia"}
        )
        s.refresh_from_db()
        return thread, s

    def test_twenty_approvals_at_once_meet_a_quorum_of_five_once(self) -> None:
        thread, s = self.suspension(5)
        people = reviewers(20)
        results = race([lambda u=u: decisions.decide(s, u, {"approved": True}) for u in people])
        assert not [r for r in results if isinstance(r, Exception)], results
        s.refresh_from_db()
        assert s.status == Suspension.Status.APPROVED
        assert kinds(s).count("SUSPENSION_DECIDED") == 1
        assert kinds(s).count("SUSPENSION_VOTED") == 5
        assert Vote.objects.filter(suspension=s, approved=True).count() == 5
        counted = [r for r in results if r.created and r.votes is not None]
        deciding = [r for r in results if r.created and r.votes is None]
        late = [r for r in results if not r.created]
        assert (len(counted), len(deciding), len(late)) == (4, 1, 15)
        [decided] = Event.objects.filter(suspension=s, type="SUSPENSION_DECIDED")
        assert len(set(decided.payload["approved_by"])) == 5
        assert decided.payload["decided_by"] == decided.payload["approved_by"][-1]
        assert all(r.suspension.status == Suspension.Status.APPROVED for r in late)
        assert Thread.objects.get(pk=thread.pk).status == Thread.Status.RUNNING

    def test_nineteen_approvals_and_one_rejection_at_once_reject(self) -> None:
        thread, s = self.suspension(20)
        people = reviewers(20)
        results = race(
            [
                (lambda u=u: decisions.decide(s, u, {"approved": False, "reason": "no"}))
                if i == 7
                else (lambda u=u: decisions.decide(s, u, {"approved": True}))
                for i, u in enumerate(people)
            ]
        )
        assert not [r for r in results if isinstance(r, Exception)], results
        s.refresh_from_db()
        assert s.status == Suspension.Status.REJECTED and s.decided_by == people[7]
        assert kinds(s).count("SUSPENSION_DECIDED") == 1

    def test_twenty_approvals_at_once_meet_a_quorum_of_twenty(self) -> None:
        _, s = self.suspension(20)
        people = reviewers(20)
        results = race([lambda u=u: decisions.decide(s, u, {"approved": True}) for u in people])
        assert not [r for r in results if isinstance(r, Exception)], results
        s.refresh_from_db()
        assert s.status == Suspension.Status.APPROVED
        assert kinds(s).count("SUSPENSION_DECIDED") == 1
        assert kinds(s).count("SUSPENSION_VOTED") == 20
        [decided] = Event.objects.filter(suspension=s, type="SUSPENSION_DECIDED")
        assert sorted(decided.payload["approved_by"]) == sorted(u.username for u in people)

    def test_one_person_twenty_times_at_once_is_one_vote(self) -> None:
        _, s = self.suspension(2)
        alice = self.users["reviewer"]
        results = race([lambda: decisions.decide(s, alice, {"approved": True}) for _ in range(20)])
        refused = [r for r in results if isinstance(r, policy.Refused)]
        voted = [r for r in results if isinstance(r, decisions.Taken)]
        assert (len(voted), len(refused)) == (1, 19), results
        assert {r.rule for r in refused} == {"already_voted"}
        s.refresh_from_db()
        assert s.status == Suspension.Status.PENDING
        assert Vote.objects.filter(suspension=s).count() == 1
        assert kinds(s) == ["SUSPENSION_VOTED"]
