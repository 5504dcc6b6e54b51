"""The one door for a person's decision (agents.door.take): what comes of each decision, as
a typed Outcome every channel words in its own terms: decided (with its grant), voted,
repeat, conflict (with who decided), refused (with the policy's rule and words), unbound."""

from datetime import timedelta
from typing import Any

import pytest
from django.utils import timezone

from agents import door, grants
from agents.hashing import canonical_hash
from agents.models import AgentDefinition, Event, Grant, Suspension
from tests.approvals import state

FOUR_EYES = "You started this run; someone else must decide it (four eyes)."


def with_policy(tool_policy: dict[str, Any]) -> None:
    state.agent("payer")
    AgentDefinition.objects.filter(name="payer").update(
        policy={"tools": {"transfer_funds": tool_policy}}
    )


def events_of(s: Suspension, kind: str) -> list[Event]:
    return list(Event.objects.filter(suspension=s, type=kind))


class DoorTestCase:
    @pytest.fixture(autouse=True)
    def setup(self, users: dict[str, Any]) -> None:
        self.users = users
        self.alice, self.bob = users["reviewer"], users["teammate"]

    def pending(self, starter: str = "operator", **kwargs: Any) -> Suspension:
        _, [s] = state.suspended(self.users[starter], **kwargs)
        return s

    def test_an_approval_is_decided_audited_and_signed(self) -> None:
        s = self.pending()
        outcome = door.take(s, self.alice, door.Decision.approve("fine"))
        assert isinstance(outcome, door.Decided) and outcome.grant is None
        assert (outcome.suspension.status, outcome.suspension.reason) == ("approved", "fine")
        s.refresh_from_db()
        assert s.decided_by_name == "alice" and s.receipt
        [event] = events_of(s, Event.Type.SUSPENSION_DECIDED)
        assert event.actor == self.alice and event.payload["approved"] is True

    def test_an_edit_a_rejection_and_a_response_are_what_was_decided(self) -> None:
        edited = {**state.TRANSFER, "amount": 5}
        s = self.pending()
        assert isinstance(
            door.take(s, self.alice, door.Decision.approve(arguments=edited)), door.Decided
        )
        s.refresh_from_db()
        assert (s.status, s.modified_args) == ("approved", edited)
        s = self.pending()
        assert isinstance(door.take(s, self.alice, door.Decision.reject("no")), door.Decided)
        s.refresh_from_db()
        assert (s.status, s.reason) == ("rejected", "no")
        s = self.pending(calls=[("ask_user", {"question": "Which account?"})])
        assert isinstance(door.take(s, self.alice, door.Decision.respond("A-1")), door.Decided)
        s.refresh_from_db()
        assert (s.status, s.response) == ("approved", "A-1")

    def test_an_approval_with_grant_terms_makes_the_grant_with_it(self) -> None:
        s = self.pending()
        terms = grants.Terms(seconds=600, max_uses=5)
        outcome = door.take(s, self.alice, door.Decision.approve(grant=terms))
        assert isinstance(outcome, door.Decided) and outcome.grant is not None
        [made] = Grant.objects.all()
        assert (made.pk, made.max_uses, made.made_with_id) == (outcome.grant.pk, 5, s.pk)
        assert made.expires_at - made.created_at == timedelta(seconds=600)

    def test_the_same_decision_again_is_a_repeat_and_another_a_conflict_naming_who(self) -> None:
        s = self.pending()
        door.take(s, self.alice, door.Decision.reject("no"))
        again = door.take(s, self.bob, door.Decision.reject("no"))
        assert isinstance(again, door.Repeat) and again.suspension.status == "rejected"
        late = door.take(s, self.bob, door.Decision.approve())
        assert isinstance(late, door.Conflict)
        assert (late.by, late.detail) == ("alice", "alice already decided: rejected.")
        # Read before the decision (a stale copy): the door learns it under its locks.
        stale = self.pending()
        copy = Suspension.objects.get(pk=stale.pk)
        door.take(stale, self.alice, door.Decision.approve())
        assert isinstance(door.take(copy, self.bob, door.Decision.approve()), door.Repeat)
        assert isinstance(door.take(copy, self.bob, door.Decision.reject()), door.Conflict)
        assert len(events_of(stale, Event.Type.SUSPENSION_DECIDED)) == 1

    def test_a_passed_deadline_is_a_conflict_with_the_deadline(self) -> None:
        s = self.pending()
        Suspension.objects.filter(pk=s.pk).update(expires_at=timezone.now() - timedelta(1))
        late = door.take(s, self.alice, door.Decision.approve())
        assert isinstance(late, door.Conflict) and late.by == "the deadline"
        assert late.detail == "The deadline passed first: it was rejected automatically."

    def test_the_policy_refuses_with_its_rule_and_words_changing_nothing(self) -> None:
        s = self.pending(starter="reviewer")
        refused = door.take(s, self.alice, door.Decision.approve())
        assert isinstance(refused, door.Refused)
        assert (refused.rule, refused.detail) == ("four_eyes", FOUR_EYES)
        with_policy({"allow_grants": False})
        s = self.pending()
        terms = grants.Terms(seconds=60, max_uses=1)
        refused = door.take(s, self.alice, door.Decision.approve(grant=terms))
        assert isinstance(refused, door.Refused) and refused.rule == "allow_grants"
        s.refresh_from_db()
        assert s.status == "pending" and not Grant.objects.exists()
        assert events_of(s, Event.Type.SUSPENSION_DECIDED) == []
        # Screened without taking (A2A checks every decision of a message first).
        assert door.refusal(s, self.alice, door.Decision.approve(grant=terms)) == refused

    def test_a_quorum_vote_is_voted_until_the_last_one(self) -> None:
        with_policy({"quorum": 2})
        s = self.pending()
        voted = door.take(s, self.alice, door.Decision.approve())
        assert isinstance(voted, door.Voted)
        assert (voted.votes["approvals"], voted.votes["required"]) == (1, 2)
        assert voted.suspension.status == "pending"
        twice = door.take(s, self.alice, door.Decision.approve())
        assert isinstance(twice, door.Refused) and twice.rule == "already_voted"
        decided = door.take(s, self.bob, door.Decision.approve())
        assert isinstance(decided, door.Decided) and decided.suspension.status == "approved"

    def test_a_decision_on_another_view_or_an_unconfirmed_version_is_unbound(self) -> None:
        s = self.pending()
        Suspension.objects.filter(pk=s.pk).update(args_hash=canonical_hash(state.TRANSFER))
        s.refresh_from_db()
        seen = door.Seen(args_hash="another")
        unbound = door.take(s, self.alice, door.Decision.reject(seen=seen))
        assert isinstance(unbound, door.Unbound) and unbound.code == "stale_view"
        # The agent changed since the request was made: an approval must say it saw that.
        Suspension.objects.filter(pk=s.pk).update(agent_version=1)
        AgentDefinition.objects.filter(name="payer").update(version=2)
        s.refresh_from_db()
        unbound = door.take(s, self.alice, door.Decision.approve())
        assert isinstance(unbound, door.Unbound) and unbound.code == "version_changed"
        assert "version 1" in unbound.detail
        s.refresh_from_db()
        assert s.status == "pending"
        confirmed = door.Decision.approve(confirm_version_change=True)
        assert isinstance(door.take(s, self.alice, confirmed), door.Decided)

    def test_an_ignore_is_decided_then_repeated_and_conflicts_once_decided(self) -> None:
        s = self.pending()
        done = door.take(s, self.alice, door.Decision.ignore())
        assert isinstance(done, door.Decided) and done.suspension.pending
        assert done.suspension.ignored_by_name == "alice"
        assert isinstance(door.take(s, self.bob, door.Decision.ignore()), door.Repeat)
        door.take(s, self.bob, door.Decision.reject("no"))
        s.refresh_from_db()
        late = door.take(s, self.alice, door.Decision.ignore())
        assert isinstance(late, door.Conflict) and late.by == "bob"

    def test_a_step_up_approval_carries_its_proof_into_the_trail(self) -> None:
        with_policy({"step_up": True})
        s = self.pending()
        refused = door.take(s, self.alice, door.Decision.approve())
        assert isinstance(refused, door.Refused) and refused.rule == "step_up"
        proof = {"credential": "cred-1", "name": "Laptop"}
        assert isinstance(
            door.take(s, self.alice, door.Decision.approve(), proof=proof), door.Decided
        )
        [event] = events_of(s, Event.Type.SUSPENSION_DECIDED)
        assert event.payload["passkey"] == proof

    def test_a_decision_holds_one_kind(self) -> None:
        with pytest.raises(ValueError):
            door.Decision(door.Kind.REJECT, arguments={"amount": 1})
        with pytest.raises(ValueError):
            door.Decision(door.Kind.RESPOND)
        with pytest.raises(ValueError):
            door.Decision(door.Kind.IGNORE, grant=grants.Terms(seconds=1, max_uses=1))
