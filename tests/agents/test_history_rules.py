"""Rules over history (agents.history, agents.tallies): a count or a sum over a window in an
auto_approve rule approves until its limit, then leaves the request to a person and says why;
the rule that decided is named, as `history`, on the row, the event and the receipt; and two
requests racing for the last unit of a sum limit, each on its own connection, cannot both pass."""

import threading
from datetime import timedelta
from typing import Any

import pytest
from django.db import connection
from django.utils import timezone

from agents import external, grants, receipts
from agents.engine import Engine
from agents.models import Event, Grant, Suspension, Thread
from agents.rules import PolicyError, check_policy, check_rule, rule_text
from tests.approvals.test_policy import PolicyTestCase, payer

FIVE_AN_HOUR = (
    "policy: {four_eyes: false, auto_approve: "
    '[{count: transfer_funds, within: 1h, per: agent, op: "<", value: 5}]}'
)
TWO_THOUSAND_A_DAY = (
    'policy: {auto_approve: [{sum: amount, within: 24h, per: requester, op: "<=", value: 2000}]}'
)
COUNT_TEXT = "count(transfer_funds, 1h, per agent) < 5"


class HistoryRulesTestCase(PolicyTestCase):
    def test_the_fifth_call_in_the_hour_waits(self, client: Any, time_machine: Any) -> None:
        for n in range(1, 5):
            thread = self.start(FIVE_AN_HOUR)
            s = self.pending(thread)
            assert s.status == Suspension.Status.APPROVED, n
            assert s.tier == "history" and s.decided_by_name == "policy"
            assert s.reason == f"rule auto_approve[0]: {COUNT_TEXT}"
            assert thread.status == Thread.Status.COMPLETED
        decided = Event.objects.filter(suspension=s, type=Event.Type.SUSPENSION_DECIDED).get()
        assert decided.payload["rule"] == COUNT_TEXT and decided.payload["tier"] == "history"
        assert decided.actor is None and decided.payload["by"] == "policy"
        jwks = self.api("reviewer").get("/.well-known/jwks.json").json()
        decider = receipts.verify(decided.payload["receipt"], jwks)["decider"]
        assert decider == {
            "kind": "rule",
            "key": "auto_approve",
            "index": 0,
            "rule": COUNT_TEXT,
            "tier": "history",
        }
        fifth = self.pending(self.start(FIVE_AN_HOUR))
        assert fifth.status == Suspension.Status.PENDING and fifth.tier == ""
        why = (
            "With this request, this agent has asked for transfer_funds 5 times within 1h; "
            f"the rule (auto_approve[0], {COUNT_TEXT}) approves only while that is under 5."
        )
        shown = self.api("reviewer").get(f"/api/suspensions/{fifth.pk}").json()
        assert shown["policy"]["needs_person"] == [why]
        client.force_login(self.users["reviewer"])
        page = client.get(f"/threads/{fifth.thread_id}/").content.decode()
        assert "Why a person decides" in page and "With this request, this agent has asked" in page
        # A person decides it; a rejected one never ran and is not counted, but the four
        # approved still fill the hour, so the next waits too.
        assert self.decide("reviewer", fifth, approved=False, reason="enough").status_code == 202
        assert self.pending(self.start(FIVE_AN_HOUR)).status == Suspension.Status.PENDING
        # An hour later the window is empty again.
        time_machine.move_to(timezone.now() + timedelta(minutes=61))
        later = self.pending(self.start(FIVE_AN_HOUR))
        assert later.status == Suspension.Status.APPROVED and later.tier == "history"

    def test_a_sum_limit_approves_while_the_total_stays_within_it(self) -> None:
        for amount, status in ((800, "approved"), (900, "approved"), (400, "pending")):
            s = self.pending(self.start(TWO_THOUSAND_A_DAY, amount=amount))
            assert (amount, s.status) == (amount, status)
        assert s.policy["needs_person"] == [
            "With this request, the amount of transfer_funds requests of whoever started this "
            "run within 24h comes to 2100; the rule (auto_approve[0], sum(amount, 24h, per "
            "requester) <= 2000) approves only while that is at most 2000."
        ]
        # While it waits it may still run, so it counts: 800 + 900 + 400 + 300 > 2000.
        waits = self.pending(self.start(TWO_THOUSAND_A_DAY, amount=300))
        assert waits.status == "pending"
        # Rejected, neither ever runs, so neither counts: 800 + 900 + 300 = 2000 fits.
        for one in (s, waits):
            assert self.decide("reviewer", one, approved=False, reason="no").status_code == 202
        last = self.pending(self.start(TWO_THOUSAND_A_DAY, amount=300))
        assert last.status == "approved" and last.tier == "history"
        assert self.pending(self.start(TWO_THOUSAND_A_DAY, amount=1)).status == "pending"

    def test_an_argument_rule_decides_as_rule(self) -> None:
        s = self.pending(
            self.start('policy: {auto_approve: [{arg: amount, op: "<", value: 500}]}', amount=20)
        )
        assert s.status == Suspension.Status.APPROVED and s.tier == "rule"
        decided = Event.objects.get(suspension=s, type=Event.Type.SUSPENSION_DECIDED)
        assert "tier" not in decided.payload and decided.payload["rule"] == "amount < 500"

    def test_a_tally_in_auto_reject_refuses_past_its_limit(self) -> None:
        policy = (
            "policy: {auto_reject: "
            '[{count: transfer_funds, within: 10m, per: thread, op: ">", value: 0}]}'
        )
        # Each run is its own thread: its first call is the only one counted, and 1 > 0.
        s = self.pending(self.start(policy))
        assert s.status == Suspension.Status.REJECTED and s.tier == "history"
        assert s.reason == "rule auto_reject[0]: count(transfer_funds, 10m, per thread) > 0"


class TallySyntaxTestCase:
    def test_a_tally_is_checked_where_declared(self) -> None:
        rule = check_rule(
            {
                "all": [
                    {"arg": "currency", "op": "==", "value": "EUR"},
                    {"sum": "amount", "tool": "pay", "within": "24h", "op": "<=", "value": 2000},
                ]
            },
            "auto_approve[0]",
        )
        assert rule["all"][1] == {
            "sum": "amount",
            "within": 86400,
            "per": "agent",
            "tool": "pay",
            "op": "<=",
            "value": 2000,
        }
        assert rule_text(rule) == (
            'currency == "EUR" and sum(amount of pay, 24h, per agent) <= 2000'
        )
        # Stored, it is checked again unchanged (an agent file's policy is re-read).
        assert check_rule(rule, "again") == rule
        for bad, words in (
            ({"count": "pay", "within": "1y", "op": "<", "value": 5}, "within"),
            ({"count": "pay", "within": "1h", "op": "in", "value": [1]}, "'op'"),
            ({"count": "pay", "within": "1h", "op": "<", "value": "5"}, "number"),
            ({"count": "pay", "within": "1h", "per": "team", "op": "<", "value": 5}, "'per'"),
            ({"count": "pay", "within": "1h", "op": "<"}, "a tally is"),
            ({"count": "pay", "sum": "x", "within": "1h", "op": "<", "value": 5}, "a tally"),
            ({"count": "pay", "tool": "x", "within": "1h", "op": "<", "value": 5}, "a tally"),
        ):
            with pytest.raises(PolicyError, match=words):
                check_rule(bad, "auto_approve[0]")


class SumRaceTestCase:
    """The last unit of a sum limit, raced by two runs of one agent, each advanced by its own
    worker thread on its own database connection."""

    POLICY = (
        "policy: {four_eyes: false, auto_approve: "
        '[{sum: amount, within: 1h, per: agent, op: "<=", value: 300}]}'
    )

    @pytest.fixture(autouse=True)
    def setup(
        self, users: dict[str, Any], api: Any, load_agents: Any, transactional_db: Any
    ) -> None:
        load_agents(payer(self.POLICY, amount=200))
        self.threads = []
        for _ in range(2):
            r = api("operator").post("/api/threads", {"agent": "payer", "message": "pay"})
            assert r.status_code == 201, r.content
            self.threads.append(r.json()["id"])

    @pytest.mark.parametrize("round_", range(3))
    def test_of_two_at_once_one_passes_and_one_waits(self, round_: int) -> None:
        barrier = threading.Barrier(2)
        errors: list[BaseException] = []

        def run(pk: str) -> None:
            try:
                barrier.wait()
                Engine().advance(pk)
            except BaseException as e:  # reported below, with the other thread's outcome
                errors.append(e)
            finally:
                connection.close()

        workers = [threading.Thread(target=run, args=(pk,)) for pk in self.threads]
        for t in workers:
            t.start()
        for t in workers:
            t.join()
        assert errors == []
        statuses = sorted(
            Suspension.objects.filter(thread_id__in=self.threads).values_list("status", flat=True)
        )
        assert statuses == ["approved", "pending"]
        approved = Suspension.objects.get(thread_id__in=self.threads, status="approved")
        assert approved.tier == "history"
        waiting = Suspension.objects.get(thread_id__in=self.threads, status="pending")
        assert "within 1h comes to 400;" in waiting.policy["needs_person"][0]


class OutsideAgentTestCase:
    """An outside agent's requests (POST /api/requests, MCP's gated calls: agents.external)
    meet the same tallies, per requester here, and race the same way."""

    @pytest.fixture(autouse=True)
    def setup(self, users: dict[str, Any], transactional_db: Any) -> None:
        self.users = users
        self.agent = external.agent_for("billing-bot", users["operator"])
        self.agent.policy = check_policy(
            {
                "four_eyes": False,
                "auto_approve": [
                    {"count": "pay", "within": "1h", "per": "requester", "op": "<", "value": 3}
                ],
            },
            "policy",
        )
        self.agent.save()

    def raise_one(self, n: int) -> Suspension:
        request = external.Request(
            agent="billing-bot",
            run_id=f"run-{n}",
            tool="pay",
            arguments={"amount": 120},
            schema={"type": "object"},
            prompt="",
            kind="confirmation",
            timeout=600,
            on_timeout="reject",
            key=f"k-{n}",
        )
        return external.raise_request(self.agent, self.agent, request, self.users["operator"])

    def test_the_third_request_of_the_hour_waits(self) -> None:
        assert [self.raise_one(n).status for n in range(3)] == ["approved", "approved", "pending"]
        assert list(Suspension.objects.values_list("tier", flat=True)) == ["history"] * 2 + [""]

    @pytest.mark.parametrize("round_", range(2))
    def test_of_two_at_once_for_the_last_one_one_passes(self, round_: int) -> None:
        assert self.raise_one(0).status == "approved"
        barrier = threading.Barrier(2)
        results: list[Any] = [None, None]

        def run(i: int) -> None:
            try:
                barrier.wait()
                results[i] = self.raise_one(i + 1).status
            except Exception as e:
                results[i] = e
            finally:
                connection.close()

        workers = [threading.Thread(target=run, args=(i,)) for i in range(2)]
        for t in workers:
            t.start()
        for t in workers:
            t.join()
        assert sorted(results) == ["approved", "pending"], results


class GrantTallyTestCase:
    """A standing grant's conditions are the rules' language: a tally in them is read as a
    rule's is, so a grant may approve at most so many calls an hour, whatever its count."""

    @pytest.fixture(autouse=True)
    def setup(self, users: dict[str, Any], db: Any) -> None:
        self.users = users
        self.agent = external.agent_for("refunder", users["operator"])
        terms = grants.Terms.check(
            {
                "seconds": 3600,
                "max_uses": 10,
                "conditions": [
                    {"count": "refund", "within": "1h", "per": "agent", "op": "<=", "value": 2}
                ],
            }
        )
        self.grant = Grant.objects.create(
            agent_name="refunder",
            tool_name="refund",
            conditions=list(terms.conditions),
            max_uses=terms.max_uses,
            created_by=users["reviewer"],
            created_by_name="alice",
            expires_at=timezone.now() + timedelta(hours=1),
        )

    def raise_one(self, n: int) -> Suspension:
        request = external.Request(
            agent="refunder",
            run_id=f"run-{n}",
            tool="refund",
            arguments={"amount": 5},
            schema={"type": "object"},
            prompt="",
            kind="confirmation",
            timeout=600,
            on_timeout="reject",
            key=f"k-{n}",
        )
        return external.raise_request(self.agent, self.agent, request, self.users["operator"])

    def test_the_grant_approves_two_an_hour(self) -> None:
        made = [self.raise_one(n) for n in range(3)]
        assert [s.status for s in made] == ["approved", "approved", "pending"]
        assert [s.tier for s in made] == ["grant", "grant", ""]
        assert made[0].reason.endswith("refund when count(refund, 1h, per agent) <= 2")
        self.grant.refresh_from_db()
        assert self.grant.uses == 2
