"""Agent versions are kept, and a decision is bound to what the reviewer saw (agents.versions).

Runs go through the real engine (scripted model) and decisions through the REST API, so the
suspension's args hash, agent version and tool hash are the ones the engine wrote.
"""

from typing import Any

import pytest

from agents import starting
from agents.engine import Engine
from agents.hashing import canonical_hash
from agents.models import AgentDefinition, AgentVersion, Event, Suspension
from tests.approvals.state import resume_url

ARGS = {"from_account": "A-1", "to_account": "B-2", "amount": 120, "currency": "EUR"}


def agent_file(description: str = "Pays invoices.", timeout: int = 600, mode: str = "") -> str:
    tool_description = f", description: {mode}" if mode else ""
    return f"""
agents:
  - name: payer
    description: {description}
    model: scripted
    tools: [transfer_funds]
    tool_overrides:
      transfer_funds: {{execution_mode: blocking, timeout: {timeout}{tool_description}}}
    script:
      - text: Paying.
        tool_calls:
          - name: transfer_funds
            input: {{from_account: A-1, to_account: B-2, amount: 120, currency: EUR}}
      - text: Done.
"""


def suspend(users: dict[str, Any]) -> Suspension:
    thread = starting.start_thread(AgentDefinition.objects.get(name="payer"), "pay", users["admin"])
    Engine().advance(thread.pk)
    return Suspension.objects.get(thread=thread)


@pytest.mark.django_db(transaction=True)
class AgentVersionsTestCase:
    def test_a_changed_file_adds_a_version_and_keeps_the_old_one(self, load_agents: Any) -> None:
        load_agents(agent_file())
        load_agents(agent_file())  # the same content: no new version
        agent = AgentDefinition.objects.get(name="payer")
        assert agent.version == 1
        assert list(agent.versions.values_list("version", flat=True)) == [1]

        load_agents(agent_file(description="Pays invoices, up to a limit."))
        agent.refresh_from_db()
        assert agent.version == 2
        kept = {v.version: v for v in AgentVersion.objects.filter(agent=agent)}
        assert kept[1].definition["description"] == "Pays invoices."
        assert kept[2].definition["description"] == "Pays invoices, up to a limit."
        assert kept[2].digest == canonical_hash(kept[2].definition)
        [event] = Event.objects.filter(type=Event.Type.AGENT_VERSION_CREATED, payload__version=2)
        assert event.payload["previous"] == 1 and event.payload["changed"] == ["description"]

    def test_a_suspension_remembers_what_it_was_made_under(
        self, load_agents: Any, users: dict[str, Any]
    ) -> None:
        load_agents(agent_file())
        s = suspend(users)
        assert s.args_hash == canonical_hash(ARGS)
        assert s.agent_version == 1 and len(s.tool_digest) == 64


@pytest.mark.django_db(transaction=True)
class BoundDecisionsTestCase:
    @pytest.fixture(autouse=True)
    def setup(self, load_agents: Any, users: dict[str, Any], api: Any) -> None:
        self.load = load_agents
        load_agents(agent_file())
        self.s = suspend(users)
        self.url = resume_url(self.s)
        self.alice = api("reviewer")
        self.seen = {"args_hash": self.s.args_hash, "agent_version": 1}

    def test_a_decision_on_what_was_shown_is_taken(self) -> None:
        r = self.alice.post(self.url, {"approved": True, "seen": self.seen})
        assert r.status_code == 202, r.content

    def test_a_decision_on_other_arguments_is_refused(self) -> None:
        seen = {**self.seen, "args_hash": canonical_hash({**ARGS, "amount": 1})}
        r = self.alice.post(self.url, {"approved": True, "seen": seen})
        assert r.status_code == 409 and r.json()["error"] == "stale_view", r.content
        self.s.refresh_from_db()
        assert self.s.pending

    def test_a_bad_seen_is_a_clear_400(self) -> None:
        r = self.alice.post(self.url, {"approved": True, "seen": {"agent_version": "one"}})
        assert r.status_code == 400 and "seen.agent_version" in r.json()["fields"]
        r = self.alice.post(self.url, {"approved": True, "confirmVersionChange": "yes"})
        assert r.status_code == 400 and "confirmVersionChange" in r.json()["fields"]

    def test_after_the_agent_changed_approving_needs_a_confirmation(self) -> None:
        self.load(agent_file(description="Pays invoices (now from a new account)."))
        shown = self.alice.get(f"/api/suspensions/{self.s.pk}").json()["version"]
        assert shown["changed"] is True
        assert shown["agent_version"] == 1 and shown["current_agent_version"] == 2
        assert "version 1" in shown["detail"] and "version 2" in shown["detail"]

        r = self.alice.post(self.url, {"approved": True, "seen": self.seen})
        assert r.status_code == 409, r.content
        assert r.json()["error"] == "version_changed"
        assert "confirmVersionChange" in r.json()["detail"]
        self.s.refresh_from_db()
        assert self.s.pending

        r = self.alice.post(
            self.url, {"approved": True, "seen": self.seen, "confirmVersionChange": True}
        )
        assert r.status_code == 202, r.content

    def test_rejecting_a_changed_request_needs_no_confirmation(self) -> None:
        self.load(agent_file(timeout=900))
        r = self.alice.post(self.url, {"approved": False, "reason": "not now"})
        assert r.status_code == 202, r.content

    def test_a_tool_offered_differently_counts_as_a_change(self) -> None:
        self.load(agent_file(mode="Moves money between any two accounts."))
        shown = self.alice.get(f"/api/suspensions/{self.s.pk}").json()["version"]
        assert shown["changed"] is True and "transfer_funds" in shown["detail"]
        r = self.alice.post(self.url, {"approved": True})
        assert r.status_code == 409 and r.json()["error"] == "version_changed"


@pytest.mark.django_db
class AdminVersionsTestCase:
    def test_an_edit_in_the_admin_is_kept_as_a_new_version(self, users: dict[str, Any]) -> None:
        from django.test import Client

        agent = AgentDefinition.objects.create(name="payer", script=[{"text": "hi"}])
        admin = Client()
        admin.force_login(users["admin"])
        url = f"/admin/agents/agentdefinition/{agent.pk}/change/"
        form = {
            "name": "payer",
            "description": "Pays <b>invoices</b>.",
            "model": "scripted",
            "tools": "[]",
            "sub_agents": "[]",
            "tool_overrides": "{}",
            "max_iterations": 10,
            "max_tokens": 4096,
            "script": '[{"text": "hi"}]',
            "agents_as_tools": "[]",
            "input_types": "[]",
            "on_input_timeout": "cancel",
            "policy": "{}",
        }
        saved = admin.post(url, form)
        assert saved.status_code == 302, saved.content
        saved = admin.post(url, {**form, "description": "Pays invoices up to 500."})
        assert saved.status_code == 302, saved.content
        agent.refresh_from_db()
        assert agent.version == 2
        assert [v.definition["description"] for v in agent.versions.order_by("version")] == [
            "Pays <b>invoices</b>.",
            "Pays invoices up to 500.",
        ]
        [event] = Event.objects.filter(type=Event.Type.AGENT_VERSION_CREATED, payload__version=2)
        assert event.actor_name == "admin" and event.payload["changed"] == ["description"]
        page = admin.get(url).content.decode()
        assert "Versions kept" in page and "v2 · " in page and "v1 · " in page
