"""Taint (agents.history.taint): once a run has called a tool that reads untrusted content or
private data, its call of a tool that sends data out waits for a person, although a rule or a
standing grant would approve it, and the card says why. A run that read nothing is approved
by the grant as before (tier `grant`); a rule may still reject a tainted call."""

from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
from django.contrib.auth.models import Group
from django.utils import timezone

from agents.engine import Engine
from agents.models import Event, Grant, Suspension, Thread
from agents.runtime.tools import registry

RESEARCHER = """
agents:
  - name: researcher
    description: Reads an account, then writes about it.
    model: scripted
    tools: [lookup_account, send_email]
    tool_overrides:
      lookup_account: {reads: true}
      send_email: {execution_mode: blocking, timeout: 600, sends_outward: true}
    policy: {four_eyes: false, auto_reject: [{arg: to, op: "==", value: all@example.com}]}
    script:
{script}
"""
READ = """      - tool_calls:
          - {name: lookup_account, input: {account: ACC-1}}
"""
SEND = """      - text: Sending the summary.
        tool_calls:
          - {name: send_email, input: {to: {to}, subject: Balance}}
      - text: Done.
"""


def researcher(
    reads: str = "reads_untrusted", read: bool = True, to: str = "ann@example.com"
) -> str:
    script = (READ if read else "") + SEND.replace("{to}", to)
    return RESEARCHER.replace("{script}", script).replace("reads: true", f"{reads}: true")


class TaintTestCase:
    @pytest.fixture(autouse=True)
    def setup(self, users: dict[str, Any], api: Any, load_agents: Any) -> None:
        self.users = users
        self.api = api
        self.load_agents = load_agents
        Group.objects.get_or_create(name="finance")
        # A standing grant that would approve every send_email of the agent.
        self.grant = Grant.objects.create(
            agent_name="researcher",
            tool_name="send_email",
            max_uses=10,
            created_by=users["reviewer"],
            created_by_name="alice",
            expires_at=timezone.now() + timedelta(hours=1),
        )

    def run(self, text: str) -> Suspension:
        self.load_agents(text)
        r = self.api("operator").post("/api/threads", {"agent": "researcher", "message": "go"})
        assert r.status_code == 201, r.content
        thread = Thread.objects.get(pk=r.json()["id"])
        Engine().advance(thread.pk)
        return Suspension.objects.get(thread=thread)

    def test_a_tainted_runs_send_waits_although_a_grant_matches(self, client: Any) -> None:
        s = self.run(researcher())
        assert s.status == Suspension.Status.PENDING and s.tier == ""
        assert s.decided_by_name == "" and "grant" not in s.policy
        [why] = s.policy["needs_person"]
        read_at = Event.objects.get(
            thread=s.thread, type=Event.Type.TOOL_RESULT, payload__tool="lookup_account"
        ).created_at
        at = timezone.localtime(read_at).strftime("%H:%M %Z")
        assert why == (
            f"This run read untrusted content (lookup_account) at {at}, then asked to send "
            "data out (send_email)."
        )
        self.grant.refresh_from_db()
        assert self.grant.uses == 0
        assert not Event.objects.filter(type=Event.Type.GRANT_USED).exists()
        # The card says why, as text.
        client.force_login(self.users["reviewer"])
        page = client.get(f"/threads/{s.thread_id}/").content.decode()
        assert "Why a person decides" in page
        assert "This run read untrusted content (lookup_account)" in page
        body = self.api("reviewer").get(f"/api/suspensions/{s.pk}").json()
        assert body["policy"]["needs_person"] == [why]
        # A person approves it; the run goes on.
        r = self.api("reviewer").post(
            f"/api/threads/{s.thread_id}/suspensions/{s.pk}/resume", {"approved": True}
        )
        assert r.status_code == 202, r.content

    def test_private_data_taints_as_well(self) -> None:
        s = self.run(researcher(reads="reads_private"))
        assert s.status == Suspension.Status.PENDING
        assert s.policy["needs_person"][0].startswith(
            "This run read private data (lookup_account) at "
        )

    def test_a_run_that_read_nothing_is_approved_by_the_grant(self) -> None:
        s = self.run(researcher(read=False))
        assert s.status == Suspension.Status.APPROVED
        assert s.decided_by_name == "grant" and s.tier == "grant"
        assert "needs_person" not in s.policy
        self.grant.refresh_from_db()
        assert self.grant.uses == 1

    def test_a_rule_still_rejects_a_tainted_call(self) -> None:
        s = self.run(researcher(to="all@example.com"))
        assert s.status == Suspension.Status.REJECTED and s.tier == "rule"
        assert "needs_person" not in s.policy

    def test_the_flags_are_true_or_false(self) -> None:
        tool = registry.get("lookup_account")
        assert tool is not None and tool.reads_untrusted is False
        assert tool.with_overrides({"reads_untrusted": True}).reads_untrusted is True
        with pytest.raises(ValueError, match="reads_untrusted must be true or false"):
            tool.with_overrides({"reads_untrusted": "yes"})

    def test_a_reading_call_that_was_refused_read_nothing(self) -> None:
        """A blocking reader a rule rejected never ran: the run is not tainted by it."""
        text = (
            researcher()
            .replace(
                "lookup_account: {reads_untrusted: true}",
                "lookup_account: {reads_untrusted: true, execution_mode: blocking}",
            )
            .replace(
                "policy: {four_eyes: false,",
                "policy: {tools: {lookup_account: {auto_reject: "
                "[{arg: account, op: '==', value: ACC-1}]}}, four_eyes: false,",
            )
        )
        self.load_agents(text)
        r = self.api("operator").post("/api/threads", {"agent": "researcher", "message": "go"})
        thread = Thread.objects.get(pk=r.json()["id"])
        Engine().advance(thread.pk)
        read, send = Suspension.objects.filter(thread=thread).order_by("created_at", "id")
        assert (read.tool_name, read.status) == ("lookup_account", "rejected")
        assert (send.tool_name, send.status, send.tier) == ("send_email", "approved", "grant")


class DemoTestCase:
    """The demo's `pettycash` shows both: a history rule approves two payments and leaves the
    third to a person, then the email after an account was read waits, each card saying why."""

    def test_the_demo_agent_shows_history_and_taint(
        self, users: dict[str, Any], api: Any, load_agents: Any
    ) -> None:
        load_agents((Path(__file__).resolve().parents[2] / "demo" / "agents.yaml").read_text())
        r = api("operator").post("/api/threads", {"agent": "pettycash", "message": "pay"})
        thread = Thread.objects.get(pk=r.json()["id"])
        Engine().advance(thread.pk)
        payments = list(Suspension.objects.filter(thread=thread).order_by("created_at", "id"))
        assert [(s.status, s.tier) for s in payments] == [
            ("approved", "history"),
            ("approved", "history"),
            ("pending", ""),
        ]
        assert "transfer_funds 3 times within 1h" in payments[2].policy["needs_person"][0]
        third = payments[2]
        path = f"/api/threads/{thread.pk}/suspensions/{third.pk}/resume"
        assert api("reviewer").post(path, {"approved": True}).status_code == 202
        Engine().advance(thread.pk)
        email = Suspension.objects.get(thread=thread, tool_name="send_email")
        assert email.status == "pending"
        assert email.policy["needs_person"][0].startswith(
            "This run read private data (lookup_account) at "
        )
