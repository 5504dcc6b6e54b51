"""Deleting a user keeps their name on what they did: decisions, events, the runs they started."""

import json
from typing import Any

import pytest
from django.contrib.auth.models import User
from django.test import Client

from agents import decisions, starting
from agents.engine import Engine
from agents.models import AgentDefinition, Suspension, Thread

AGENTS = """
agents:
  - name: payer
    model: scripted
    tools: [transfer_funds]
    # carol starts the run and rejects its call herself: four eyes is off for this agent.
    policy: {four_eyes: false}
    script:
      - tool_calls:
          - {name: transfer_funds, input: {from_account: A-1, to_account: B-2, amount: 5}}
      - text: Done.
"""


class DeletedUserTestCase:
    @pytest.fixture(autouse=True)
    def setup(self, users: dict[str, Any], load_agents: Any, api: Any) -> None:
        load_agents(AGENTS)
        self.users = users
        self.api = api("teammate")
        # A reviewer who starts a run, rejects its call, and then leaves the company.
        leaver = User.objects.create_user("carol", password="carol-password-1")
        leaver.groups.set(users["reviewer"].groups.all())
        self.thread = starting.start_thread(AgentDefinition.objects.get(name="payer"), "go", leaver)
        Engine().advance(self.thread.pk)
        self.suspension = Suspension.objects.get(thread=self.thread)
        decisions.decide(self.suspension, leaver, {"approved": False, "reason": "not today"})
        leaver.delete()
        Engine().advance(self.thread.pk)  # resumed after the user is gone

    def test_it_still_names_who_decided_in_the_api(self) -> None:
        r = self.api.get(f"/api/suspensions/{self.suspension.pk}")
        assert r.status_code == 200
        assert r.json()["decision"]["decided_by"] == "carol"
        thread = self.api.get(f"/api/threads/{self.thread.pk}").json()
        assert thread["created_by"] == "carol"
        # A different decision now conflicts, and the conflict says with whom.
        url = f"/api/threads/{self.thread.pk}/suspensions/{self.suspension.pk}/resume"
        conflict = self.api.post(url, {"approved": True})
        assert conflict.status_code == 409
        assert conflict.json()["outcome"]["decided_by"] == "carol"
        assert conflict.json()["detail"].startswith("carol already decided")

    def test_it_still_names_the_actor_in_the_event_list(self) -> None:
        events = self.api.get("/api/events", thread=str(self.thread.pk)).json()["events"]
        actors = {e["type"]: e["actor"] for e in events}
        assert actors["THREAD_STARTED"] == "carol"
        assert actors["SUSPENSION_DECIDED"] == "carol"
        assert actors["AGENT_RESUMED"] is None
        decided = [e for e in events if e["type"] == "SUSPENSION_DECIDED"][0]
        assert decided["payload"]["decided_by"] == "carol"

    def test_it_still_names_the_reviewer_in_the_audit_trail_and_its_exports(self) -> None:
        staff = Client()
        staff.force_login(self.users["admin"])
        html = staff.get("/audit/").content.decode()
        assert '<span class="reviewer">carol</span>' in html
        assert "Decided</strong> by carol" in html
        assert staff.get("/audit/", {"reviewer": "carol"}).context["total"] == 1
        jsonl = b"".join(staff.get("/audit/export.jsonl").streaming_content).decode()
        assert json.loads(jsonl.splitlines()[0])["decided_by"] == "carol"
        csv_text = b"".join(staff.get("/audit/export.csv").streaming_content).decode()
        assert ",carol," in csv_text

    def test_it_still_names_them_on_the_thread_page(self) -> None:
        client = Client()
        client.force_login(self.users["reviewer"])
        html = client.get(f"/threads/{self.thread.pk}/").content.decode()
        assert '<span class="who">carol</span>' in html
        assert "rejected by carol: not today" in html

    def test_the_engine_tells_the_model_who_rejected(self) -> None:
        frame = Thread.objects.get(pk=self.thread.pk).frames.get()
        results = [
            block
            for message in frame.messages
            for block in (message["content"] if isinstance(message["content"], list) else [])
            if block.get("type") == "tool_result"
        ]
        assert any("carol" in json.dumps(r) for r in results)
