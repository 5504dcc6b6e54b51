"""Who may decide what (agents.policy) through the REST API: four eyes, groups, a quorum, an
edit that restarts the count, any rejection rejecting, and rules that decide by policy."""

from typing import Any

import pytest
from django.contrib.auth.models import Group

from agents.engine import Engine
from agents.models import Event, Suspension, Thread, Vote
from tests.approvals.state import resume_url

PAYER = """
agents:
  - name: payer
    description: Pays an invoice once approved.
    model: scripted
    tools: [transfer_funds]
    tool_overrides:
      transfer_funds: {execution_mode: blocking, timeout: 600}
    {policy}
    script:
      - text: Invoice 118 is due.
        tool_calls:
          - name: transfer_funds
            input: {from_account: ACC-1, to_account: ACC-2, amount: {amount}, currency: EUR}
      - text: Done.
"""


def payer(policy: str = "", amount: int = 200) -> str:
    return PAYER.replace("{policy}", policy).replace("{amount}", str(amount))


def decided_events(s: Suspension) -> list[Event]:
    return list(Event.objects.filter(suspension=s, type=Event.Type.SUSPENSION_DECIDED))


class PolicyTestCase:
    @pytest.fixture(autouse=True)
    def setup(self, users: dict[str, Any], api: Any, load_agents: Any) -> None:
        self.users = users
        self.api = api
        self.load_agents = load_agents
        Group.objects.get_or_create(name="finance")

    def start(self, policy: str = "", amount: int = 200, who: str = "operator") -> Thread:
        """The payer's run, started by `who` through the API and run to its suspension."""
        self.load_agents(payer(policy, amount))
        r = self.api(who).post("/api/threads", {"agent": "payer", "message": "pay"})
        assert r.status_code == 201, r.content
        thread = Thread.objects.get(pk=r.json()["id"])
        Engine().advance(thread.pk)
        thread.refresh_from_db()
        return thread

    def pending(self, thread: Thread) -> Suspension:
        return Suspension.objects.get(thread=thread)

    def decide(self, who: str, s: Suspension, **decision: Any) -> Any:
        return self.api(who).post(resume_url(s), decision)


class FourEyesTestCase(PolicyTestCase):
    def test_who_started_the_run_may_not_decide_it(self) -> None:
        thread = self.start(who="reviewer")
        s = self.pending(thread)
        r = self.decide("reviewer", s, approved=True)
        assert r.status_code == 403, r.content
        body = r.json()
        assert body["error"] == "forbidden_by_policy" and body["rule"] == "four_eyes"
        assert body["detail"] == "You started this run; someone else must decide it (four eyes)."
        s.refresh_from_db()
        assert s.status == Suspension.Status.PENDING and decided_events(s) == []
        # A rejection is a decision too.
        assert self.decide("reviewer", s, approved=False, reason="no").status_code == 403
        # Someone else decides it.
        assert self.decide("teammate", s, approved=True).status_code == 202
        s.refresh_from_db()
        assert s.status == Suspension.Status.APPROVED and s.decided_by_name == "bob"

    def test_the_card_says_why_the_starter_may_not_decide(self) -> None:
        s = self.pending(self.start(who="reviewer"))
        mine = self.api("reviewer").get(f"/api/suspensions/{s.pk}").json()
        assert mine["you"] == {
            "may_decide": False,
            "rule": "four_eyes",
            "why_not": "You started this run; someone else must decide it (four eyes).",
        }
        assert mine["policy"]["four_eyes"] is True and mine["policy"]["started_by"] == "alice"
        theirs = self.api("teammate").get(f"/api/suspensions/{s.pk}").json()
        assert theirs["you"] == {"may_decide": True, "rule": None, "why_not": None}

    def test_an_agent_file_may_turn_four_eyes_off(self) -> None:
        s = self.pending(self.start("policy: {four_eyes: false}", who="reviewer"))
        assert s.policy["four_eyes"] is False
        assert self.decide("reviewer", s, approved=True).status_code == 202


class GroupsTestCase(PolicyTestCase):
    def test_only_the_groups_named_may_decide(self) -> None:
        s = self.pending(self.start("policy: {groups: [finance]}"))
        r = self.decide("reviewer", s, approved=True)
        assert r.status_code == 403
        assert r.json()["rule"] == "groups"
        assert r.json()["detail"] == "Only group finance may decide this request."
        card = self.api("reviewer").get(f"/api/suspensions/{s.pk}").json()
        assert card["you"]["why_not"] == "Only group finance may decide this request."
        self.users["teammate"].groups.add(Group.objects.get(name="finance"))
        assert self.decide("teammate", s, approved=True).status_code == 202

    def test_a_tool_policy_of_the_agent_overrides_its_top_level(self) -> None:
        policy = "policy: {groups: [finance], tools: {transfer_funds: {groups: [reviewers]}}}"
        s = self.pending(self.start(policy))
        assert s.policy["groups"] == ["reviewers"]
        assert self.decide("reviewer", s, approved=True).status_code == 202


class QuorumTestCase(PolicyTestCase):
    def test_two_people_reach_a_quorum_of_two(self) -> None:
        thread = self.start("policy: {quorum: 2}")
        s = self.pending(thread)
        r = self.decide("reviewer", s, approved=True, reason="fine")
        assert r.status_code == 202, r.content
        body = r.json()
        assert body["outcome"] is None
        assert body["votes"] == {"approvals": 1, "required": 2, "approved_by": ["alice"]}
        assert body["suspension"]["status"] == "pending"
        assert body["suspension"]["policy"]["approvals"] == 1
        [voted] = Event.objects.filter(suspension=s, type=Event.Type.SUSPENSION_VOTED)
        assert voted.actor == self.users["reviewer"] and voted.payload["approvals"] == 1
        assert Thread.objects.get(pk=thread.pk).status == Thread.Status.SUSPENDED

        # The same person again does not make two.
        again = self.decide("reviewer", s, approved=True, reason="fine")
        assert again.status_code == 403
        assert again.json()["rule"] == "already_voted"
        assert again.json()["detail"] == "You already approved; waiting for 1 more approval."
        s.refresh_from_db()
        assert s.status == Suspension.Status.PENDING and decided_events(s) == []
        card = self.api("reviewer").get(f"/api/suspensions/{s.pk}").json()
        assert card["you"]["why_not"] == "You already approved; waiting for 1 more approval."

        r = self.decide("teammate", s, approved=True)
        assert r.status_code == 202 and r.json()["outcome"]["status"] == "approved"
        s.refresh_from_db()
        assert s.status == Suspension.Status.APPROVED and s.decided_by_name == "bob"
        assert s.modified_args is None  # approved as the agent asked
        [decided] = decided_events(s)
        assert decided.payload["approved_by"] == ["alice", "bob"]
        assert decided.payload["quorum"] == 2
        assert Thread.objects.get(pk=thread.pk).status == Thread.Status.RUNNING

    def test_an_edit_restarts_the_count(self) -> None:
        s = self.pending(self.start("policy: {quorum: 2}"))
        assert self.decide("reviewer", s, approved=True).status_code == 202
        edited = {"from_account": "ACC-1", "to_account": "ACC-2", "amount": 150, "currency": "EUR"}
        r = self.decide("teammate", s, approved=True, modifiedArgs=edited)
        assert r.status_code == 202
        # alice approved other arguments: bob's edit is the only approval of these.
        assert r.json()["votes"] == {"approvals": 1, "required": 2, "approved_by": ["bob"]}
        assert r.json()["suspension"]["policy"]["edited_args"] == edited
        s.refresh_from_db()
        assert s.status == Suspension.Status.PENDING
        # alice approves what is now proposed: the edit.
        r = self.decide("reviewer", s, approved=True)
        assert r.status_code == 202 and r.json()["outcome"]["status"] == "approved"
        s.refresh_from_db()
        assert s.modified_args == edited
        assert decided_events(s)[0].payload["approved_by"] == ["bob", "alice"]

    def test_any_rejection_rejects_at_once(self) -> None:
        s = self.pending(self.start("policy: {quorum: 3}"))
        assert self.decide("reviewer", s, approved=True).status_code == 202
        r = self.decide("teammate", s, approved=False, reason="wrong payee")
        assert r.status_code == 202 and r.json()["outcome"]["status"] == "rejected"
        s.refresh_from_db()
        assert s.status == Suspension.Status.REJECTED and s.reason == "wrong payee"
        assert len(decided_events(s)) == 1
        assert Vote.objects.filter(suspension=s).count() == 2

    def test_a_reviewer_who_approved_may_still_reject(self) -> None:
        s = self.pending(self.start("policy: {quorum: 2}"))
        assert self.decide("reviewer", s, approved=True).status_code == 202
        assert (
            self.decide("reviewer", s, approved=False, reason="on second thought").status_code
            == 202
        )
        s.refresh_from_db()
        assert s.status == Suspension.Status.REJECTED


class RulesTestCase(PolicyTestCase):
    def test_an_auto_approve_rule_decides_at_once_audited_as_policy(self) -> None:
        rule = 'policy: {auto_approve: [{arg: amount, op: "<", value: 500}]}'
        thread = self.start(rule, amount=200)
        s = self.pending(thread)
        assert s.status == Suspension.Status.APPROVED and s.decided_by is None
        assert s.decided_by_name == "policy"
        assert s.reason == "rule auto_approve[0]: amount < 500"
        [decided] = decided_events(s)
        assert decided.actor is None
        assert decided.payload["by"] == "policy" and decided.payload["rule"] == "amount < 500"
        assert decided.payload["decided_by"] == "policy"
        # Raised, decided, and the run went on without waiting for anyone.
        types = list(Event.objects.filter(suspension=s).values_list("type", flat=True))
        assert types[:2] == ["AGENT_SUSPENDED", "SUSPENSION_DECIDED"]
        assert Thread.objects.get(pk=thread.pk).status == Thread.Status.COMPLETED
        # A decision sent afterwards learns the recorded outcome.
        r = self.decide("reviewer", s, approved=False, reason="no")
        assert r.status_code == 409 and r.json()["outcome"]["decided_by"] == "policy"

    def test_an_amount_over_the_limit_waits_for_a_person(self) -> None:
        rule = 'policy: {auto_approve: [{arg: amount, op: "<", value: 500}]}'
        s = self.pending(self.start(rule, amount=900))
        assert s.status == Suspension.Status.PENDING

    def test_an_auto_reject_rule_rejects_at_once(self) -> None:
        rule = 'policy: {auto_reject: [{arg: currency, op: "not in", value: [EUR, USD]}]}'
        self.load_agents(payer(rule).replace("currency: EUR", "currency: GBP"))
        r = self.api("operator").post("/api/threads", {"agent": "payer", "message": "pay"})
        thread = Thread.objects.get(pk=r.json()["id"])
        Engine().advance(thread.pk)
        s = self.pending(thread)
        assert s.status == Suspension.Status.REJECTED and s.decided_by_name == "policy"
        assert 'currency not in ["EUR", "USD"]' in s.reason
        [decided] = decided_events(s)
        assert decided.actor is None and decided.payload["key"] == "auto_reject"

    def test_edited_arguments_meet_the_auto_reject_rules(self) -> None:
        rule = 'policy: {auto_reject: [{arg: amount, op: ">=", value: 1000}]}'
        s = self.pending(self.start(rule, amount=200))
        assert s.status == Suspension.Status.PENDING
        edited = {"from_account": "ACC-1", "to_account": "ACC-2", "amount": 5000}
        r = self.decide("reviewer", s, approved=True, modifiedArgs=edited)
        assert r.status_code == 403
        assert r.json()["rule"] == "auto_reject"
        assert r.json()["detail"] == (
            "The edited arguments are refused by policy: auto_reject[0] amount >= 1000."
        )
        s.refresh_from_db()
        assert s.status == Suspension.Status.PENDING
        assert self.decide("reviewer", s, approved=True).status_code == 202


class OldRowsTestCase(PolicyTestCase):
    def test_a_suspension_with_no_policy_kept_gets_the_defaults(self) -> None:
        from tests.approvals import state

        _, [s] = state.suspended(self.users["reviewer"])
        Suspension.objects.filter(pk=s.pk).update(policy={})
        s.refresh_from_db()
        assert self.decide("reviewer", s, approved=True).json()["rule"] == "four_eyes"
        assert self.decide("teammate", s, approved=True).status_code == 202


class PageTestCase(PolicyTestCase):
    """The inbox and the thread page draw the card read-only, with why, for whoever may not
    decide it; the buttons are not offered then (static/js/cards.js does the same live)."""

    def page(self, who: str, path: str = "/") -> str:
        from django.test import Client

        client = Client()
        client.force_login(self.users[who])
        r = client.get(path)
        assert r.status_code == 200
        return r.content.decode()

    def card_of(self, html: str, s: Suspension) -> str:
        start = html.rindex("<article", 0, html.index(f'id="s-{s.pk}"'))
        return html[start : html.index("</article>", start)]

    def test_the_starter_sees_a_read_only_card_with_why(self) -> None:
        thread = self.start(who="reviewer")
        s = self.pending(thread)
        for path in ("/", f"/threads/{thread.pk}/"):
            mine = self.card_of(self.page("reviewer", path), s)
            assert "read-only" in mine
            assert "You started this run; someone else must decide it (four eyes)." in mine
            assert 'class="only-confirmation decide-part" hidden' in mine
            theirs = self.card_of(self.page("teammate", path), s)
            assert "read-only" not in theirs and "four eyes" not in theirs
            assert 'class="only-confirmation decide-part">' in theirs

    def test_the_card_counts_the_approvals_of_a_quorum(self) -> None:
        s = self.pending(self.start("policy: {quorum: 2}"))
        assert self.decide("reviewer", s, approved=True).status_code == 202
        mine = self.card_of(self.page("reviewer"), s)
        assert '<span class="approvals">1</span> of <span class="quorum">2</span> approvals' in mine
        assert "You already approved; waiting for 1 more approval." in mine
        theirs = self.card_of(self.page("teammate"), s)
        assert '<span class="approvals">1</span> of <span class="quorum">2</span>' in theirs
        assert "You already approved" not in theirs and "read-only" not in theirs

    def test_a_group_name_is_text(self) -> None:
        Group.objects.create(name="<b>fin</b>")
        s = self.pending(self.start('policy: {groups: ["<b>fin</b>"]}'))
        mine = self.card_of(self.page("reviewer"), s)
        assert "Only group &lt;b&gt;fin&lt;/b&gt; may decide this request." in mine
        assert "<b>fin</b>" not in mine
