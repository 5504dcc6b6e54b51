"""The decision kinds beyond approve and reject: respond, ignore, and which a tool allows.

Each goes through the one door (agents.decisions.decide / ignore): the policy check under the
locks, an audited Event in the hash chain, and conditional updates, so of two reviewers at
once exactly one wins.
"""

from datetime import timedelta
from typing import Any

import pytest
from django.utils import timezone

from agents import deadlines, decisions
from agents.chain import verify
from agents.models import AgentDefinition, Event, Suspension, Thread
from agents.runtime.loop import decision_result
from agents.runtime.tools import registry
from agents.runtime.turn import Decision
from tests.agents.test_decision_races import race
from tests.approvals import state
from tests.approvals.state import resume_url


def allow(agent: str = "payer", **flags: bool) -> None:
    """Set the agent's policy for transfer_funds (made before the suspension, which keeps it)."""
    state.agent(agent)
    AgentDefinition.objects.filter(name=agent).update(
        policy={"tools": {"transfer_funds": {f"allow_{k}": v for k, v in flags.items()}}}
    )


def events_of(s: Suspension, type: str) -> list[Event]:
    return list(Event.objects.filter(suspension=s, type=type))


class RespondTestCase:
    @pytest.fixture(autouse=True)
    def setup(self, users: dict[str, Any], api: Any) -> None:
        allow(respond=True)
        self.users = users
        self.alice, self.bob = api("reviewer"), api("teammate")
        self.thread, [self.s] = state.suspended(users["operator"])
        self.url = resume_url(self.s)

    def test_a_response_answers_the_agent_instead_of_deciding(self) -> None:
        r = self.alice.post(self.url, {"response": "Pay half now, half in March."})
        assert r.status_code == 202, r.content
        outcome = r.json()["outcome"]
        assert outcome["status"] == "responded" and outcome["approved"] is None
        assert outcome["response"] == "Pay half now, half in March."
        self.s.refresh_from_db()
        assert self.s.status == Suspension.Status.RESPONDED
        assert self.s.decided_by == self.users["reviewer"]
        [event] = events_of(self.s, Event.Type.SUSPENSION_DECIDED)
        assert event.actor == self.users["reviewer"]
        assert event.payload["status"] == "responded"
        assert event.payload["response"] == "Pay half now, half in March."
        assert Thread.objects.get(pk=self.thread.pk).status == Thread.Status.RUNNING
        assert verify().breaks == []

    def test_the_model_gets_the_response_as_the_result_marked_as_a_reviewer_s(self) -> None:
        tool = registry.get("transfer_funds")
        call = {"id": "toolu_1", "name": "transfer_funds", "input": state.TRANSFER}
        decision = Decision(
            status="responded", approved=False, response="Wait for March.", decided_by="alice"
        )
        content, is_error = decision_result(call, tool, decision)
        assert content.startswith("Reviewer response from alice")
        assert "transfer_funds did not run" in content and content.endswith("Wait for March.")
        assert is_error  # the model must not take the call for done

    def test_the_same_response_repeated_is_200_and_another_decision_409(self) -> None:
        assert self.alice.post(self.url, {"response": "Not yet."}).status_code == 202
        assert self.bob.post(self.url, {"response": "Not yet."}).status_code == 200
        for body in ({"response": "Other"}, {"approved": True}, {"ignore": True}):
            r = self.bob.post(self.url, body)
            assert r.status_code == 409, body
            assert r.json()["outcome"]["status"] == "responded"
        assert len(events_of(self.s, Event.Type.SUSPENSION_DECIDED)) == 1

    def test_four_eyes_applies_to_a_response(self, api: Any) -> None:
        r = api("operator").post(self.url, {"response": "Mine."})
        assert r.status_code == 403
        self.s.refresh_from_db()
        assert self.s.status == Suspension.Status.PENDING

    def test_an_empty_response_is_a_field_error(self) -> None:
        r = self.alice.post(self.url, {"response": "  "})
        assert r.status_code == 400 and "response" in r.json()["fields"]


class AllowedKindsTestCase:
    @pytest.fixture(autouse=True)
    def setup(self, users: dict[str, Any], api: Any) -> None:
        self.users = users
        self.alice = api("reviewer")

    def suspended(self, **flags: bool) -> Suspension:
        allow(**flags)
        _, [s] = state.suspended(self.users["operator"])
        return s

    def refused(self, s: Suspension, body: dict[str, Any]) -> dict[str, Any]:
        r = self.alice.post(resume_url(s), body)
        assert r.status_code == 403, (body, r.content)
        assert r.json()["error"] == "forbidden_by_policy" and r.json()["rule"] == "not_allowed"
        s.refresh_from_db()
        assert s.status == Suspension.Status.PENDING and s.ignored_at is None
        assert not Event.objects.filter(suspension=s).exclude(type="AGENT_SUSPENDED").exists()
        return r.json()

    def test_the_card_is_told_what_the_tool_allows(self) -> None:
        s = self.suspended(edit=False, respond=True)
        r = self.alice.get(f"/api/suspensions/{s.pk}")
        assert r.json()["policy"]["allow"] == {
            "accept": True,
            "edit": False,
            "respond": True,
            "ignore": True,
        }

    def test_a_tool_without_edits_refuses_edited_arguments(self) -> None:
        s = self.suspended(edit=False)
        body = self.refused(s, {"approved": True, "modifiedArgs": {**state.TRANSFER, "amount": 1}})
        assert "edit" in body["detail"]
        # The arguments as asked are an approval, not an edit.
        r = self.alice.post(resume_url(s), {"approved": True, "modifiedArgs": state.TRANSFER})
        assert r.status_code == 202

    def test_a_tool_without_accept_takes_only_an_edit_or_a_rejection(self) -> None:
        s = self.suspended(accept=False)
        self.refused(s, {"approved": True})
        self.refused(s, {"approved": True, "modifiedArgs": dict(state.TRANSFER)})
        edited = {**state.TRANSFER, "amount": 20}
        assert (
            self.alice.post(resume_url(s), {"approved": True, "modifiedArgs": edited}).status_code
            == 202
        )

    def test_a_rejection_is_always_allowed(self) -> None:
        s = self.suspended(accept=False, edit=False, respond=False, ignore=False)
        self.refused(s, {"ignore": True})
        self.refused(s, {"response": "hm"})
        r = self.alice.post(resume_url(s), {"approved": False, "reason": "no"})
        assert r.status_code == 202

    def test_a_question_is_answered_whatever_allow_respond_says(self) -> None:
        _, [s] = state.suspended(
            self.users["operator"], calls=[("ask_user", {"question": "Which?"})]
        )
        assert s.policy.get("allow_respond", False) is False
        r = self.alice.post(resume_url(s), {"response": "That one."})
        assert r.status_code == 202 and r.json()["outcome"]["status"] == "approved"

    def test_an_agent_file_sets_the_flags_per_tool(self, load_agents: Any) -> None:
        load_agents(
            """
agents:
  - name: careful
    model: scripted
    tools: [transfer_funds]
    policy:
      tools:
        transfer_funds: {allow_edit: false, allow_respond: true}
    script:
      - text: hi
"""
        )
        agent = AgentDefinition.objects.get(name="careful")
        assert agent.policy["tools"]["transfer_funds"] == {
            "allow_edit": False,
            "allow_respond": True,
        }

    def test_a_flag_that_is_not_true_or_false_is_refused(self, load_agents: Any) -> None:
        from agents.agentfiles import AgentFileError

        with pytest.raises(AgentFileError, match="allow_ignore: true or false"):
            load_agents(
                """
agents:
  - name: odd
    model: scripted
    tools: [transfer_funds]
    policy: {allow_ignore: sometimes}
    script:
      - text: hi
"""
            )


class IgnoreTestCase:
    @pytest.fixture(autouse=True)
    def setup(self, users: dict[str, Any], api: Any) -> None:
        self.users = users
        self.alice, self.bob = api("reviewer"), api("teammate")
        self.thread, [self.s] = state.suspended(users["operator"])
        self.url = resume_url(self.s)

    def test_it_dismisses_without_deciding_and_is_audited(self) -> None:
        r = self.alice.post(self.url, {"ignore": True})
        assert r.status_code == 202, r.content
        body = r.json()
        assert body["outcome"] is None
        assert body["suspension"]["status"] == "pending"
        assert body["suspension"]["ignored"]["by"] == "alice"
        self.s.refresh_from_db()
        assert self.s.status == Suspension.Status.PENDING and self.s.decided_by is None
        assert self.s.ignored_by == self.users["reviewer"] and self.s.ignored_at is not None
        [event] = events_of(self.s, Event.Type.SUSPENSION_IGNORED)
        assert event.actor == self.users["reviewer"]
        assert event.payload["by"] == "alice" and event.payload["on_timeout"] == "reject"
        assert Thread.objects.get(pk=self.thread.pk).status == Thread.Status.SUSPENDED
        assert verify().breaks == []

    def test_an_ignored_request_leaves_the_inbox(self, client: Any) -> None:
        client.force_login(self.users["teammate"])
        assert f'id="s-{self.s.pk}"' in client.get("/").content.decode()
        assert self.alice.post(self.url, {"ignore": True}).status_code == 202
        assert f'id="s-{self.s.pk}"' not in client.get("/").content.decode()
        # Still on its thread's page, where it can be decided, and the transcript says so.
        page = client.get(f"/threads/{self.thread.pk}/").content.decode()
        assert f'id="s-{self.s.pk}"' in page
        assert "dismissed transfer_funds from the inbox; its deadline still applies" in page
        assert 'Dismissed from the inbox by <span class="ignored-by">alice</span>' in page

    def test_the_thread_page_shows_an_edited_approval_s_arguments(self, client: Any) -> None:
        edited = {**state.TRANSFER, "amount": 150}
        assert (
            self.alice.post(self.url, {"approved": True, "modifiedArgs": edited}).status_code == 202
        )
        client.force_login(self.users["teammate"])
        page = client.get(f"/threads/{self.thread.pk}/").content.decode()
        card = page[page.index(f'id="s-{self.s.pk}"') :]
        card = card[: card.index("</article>")]
        ran = card[card.index('class="ran-with"') :]
        assert "Approved with edited arguments" in ran
        assert '<tr class="changed"><th scope="row">amount</th><td class="before">200</td>' in ran
        assert '<td class="after">150</td>' in ran

    def test_the_deadline_still_applies(self) -> None:
        assert self.alice.post(self.url, {"ignore": True}).status_code == 202
        assert deadlines.expire_overdue(now=self.s.expires_at + timedelta(seconds=1)) == 1
        self.s.refresh_from_db()
        assert self.s.status == Suspension.Status.TIMED_OUT and self.s.approved is False

    def test_it_can_still_be_decided(self) -> None:
        assert self.alice.post(self.url, {"ignore": True}).status_code == 202
        assert self.bob.post(self.url, {"approved": True}).status_code == 202
        self.s.refresh_from_db()
        assert self.s.status == Suspension.Status.APPROVED

    def test_ignoring_again_is_200_and_writes_nothing(self) -> None:
        assert self.alice.post(self.url, {"ignore": True}).status_code == 202
        r = self.bob.post(self.url, {"ignore": True})
        assert r.status_code == 200 and r.json()["suspension"]["ignored"]["by"] == "alice"
        assert len(events_of(self.s, Event.Type.SUSPENSION_IGNORED)) == 1

    def test_ignoring_a_decided_request_is_a_conflict(self) -> None:
        assert self.alice.post(self.url, {"approved": False}).status_code == 202
        r = self.bob.post(self.url, {"ignore": True})
        assert r.status_code == 409 and r.json()["outcome"]["status"] == "rejected"
        assert not events_of(self.s, Event.Type.SUSPENSION_IGNORED)

    def test_ignoring_after_the_deadline_applies_the_deadline(self) -> None:
        Suspension.objects.filter(pk=self.s.pk).update(
            expires_at=timezone.now() - timedelta(seconds=1)
        )
        r = self.alice.post(self.url, {"ignore": True})
        assert r.status_code == 409 and r.json()["outcome"]["status"] == "timed_out"

    def test_who_may_not_decide_may_not_ignore(self, api: Any) -> None:
        assert api("operator").post(self.url, {"ignore": True}).status_code == 403
        assert api("outsider").post(self.url, {"ignore": True}).status_code == 403
        self.s.refresh_from_db()
        assert self.s.ignored_at is None

    @pytest.mark.parametrize(
        "body", [{"ignore": False}, {"ignore": "yes"}, {"ignore": True, "reason": "meh"}]
    )
    def test_a_bad_ignore_is_a_field_error(self, body: dict[str, Any]) -> None:
        r = self.alice.post(self.url, body)
        assert r.status_code == 400, body
        self.s.refresh_from_db()
        assert self.s.ignored_at is None


class DecisionKindRaceTestCase:
    @pytest.fixture(autouse=True)
    def setup(self, users: dict[str, Any], transactional_db: Any) -> None:
        self.users = users

    def test_of_a_response_and_an_approval_at_once_exactly_one_wins(self) -> None:
        alice, bob = self.users["reviewer"], self.users["teammate"]
        allow(respond=True)
        _, [s] = state.suspended(self.users["operator"])
        results = race(
            [
                lambda: decisions.decide(s, alice, {"response": "Later."}),
                lambda: decisions.decide(s, bob, {"approved": True}),
            ]
        )
        assert not [r for r in results if isinstance(r, Exception)], results
        assert sorted(r.created for r in results) == [False, True]
        s.refresh_from_db()
        assert s.status in (Suspension.Status.RESPONDED, Suspension.Status.APPROVED)
        assert Event.objects.filter(suspension=s, type="SUSPENSION_DECIDED").count() == 1
        assert verify().breaks == []

    def test_an_ignore_and_a_rejection_at_once_leave_the_rejection(self) -> None:
        alice, bob = self.users["reviewer"], self.users["teammate"]
        _, [s] = state.suspended(self.users["operator"])
        results = race(
            [
                lambda: decisions.ignore(s, alice),
                lambda: decisions.decide(s, bob, {"approved": False}),
            ]
        )
        assert not [r for r in results if isinstance(r, Exception)], results
        s.refresh_from_db()
        assert s.status == Suspension.Status.REJECTED
        ignored = Event.objects.filter(suspension=s, type="SUSPENSION_IGNORED").count()
        # Either the ignore came first (and was recorded), or it found the request decided.
        assert ignored == (1 if s.ignored_at else 0)
        assert results[0].created == bool(s.ignored_at)
        assert verify().breaks == []

    def test_two_ignores_at_once_record_one(self) -> None:
        alice, bob = self.users["reviewer"], self.users["teammate"]
        _, [s] = state.suspended(self.users["operator"])
        results = race([lambda: decisions.ignore(s, alice), lambda: decisions.ignore(s, bob)])
        assert not [r for r in results if isinstance(r, Exception)], results
        assert sorted(r.created for r in results) == [False, True]
        assert Event.objects.filter(suspension=s, type="SUSPENSION_IGNORED").count() == 1
