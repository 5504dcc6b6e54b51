"""The thread page: transcript, status, stack breadcrumb, message box and cancel button."""

from typing import Any

import pytest
from django.test import Client

from agents import decisions, external, replies, starting
from agents.engine import Engine
from agents.models import AgentDefinition, Event, Suspension, Thread

AGENTS = """
agents:
  - name: boss
    model: scripted
    tools: [transfer_funds]
    sub_agents: [writer]
    script:
      - text: I will ask the writer.
        tool_calls:
          - {name: use_skill, input: {name: writer, message: "Draft it <i>now</i>"}}
      - text: All done.
  - name: writer
    model: scripted
    tools: [transfer_funds]
    script:
      - text: "<img src=x onerror=alert(1)> Paying."
        tool_calls:
          - {name: transfer_funds, input: {from_account: A-1, to_account: B-2, amount: 5}}
      - tool_calls:
          - {name: complete, input: {result: Wrote it.}}
  - name: chatty
    model: scripted
    tools: []
    sub_agents: [picker]
    script:
      - tool_calls:
          - {name: use_agent, input: {name: picker, message: Pick a colour}}
      - text: Blue it is.
  - name: picker
    model: scripted
    tools: []
    script:
      - text: Which colour?
      - tool_calls:
          - {name: complete, input: {result: blue}}
"""


def start(agent: str, user: Any, message: str = "go") -> Thread:
    thread = starting.start_thread(AgentDefinition.objects.get(name=agent), message, user)
    Engine().advance(thread.pk)
    return Thread.objects.get(pk=thread.pk)


class ThreadPageTestCase:
    @pytest.fixture(autouse=True)
    def setup(self, users: dict[str, Any], load_agents: Any) -> None:
        load_agents(AGENTS)
        self.users = users
        self.client = Client()
        self.client.force_login(users["reviewer"])

    def page(self, thread: Thread) -> str:
        r = self.client.get(f"/threads/{thread.pk}/")
        assert r.status_code == 200
        return r.content.decode()

    def test_it_needs_a_login_and_the_view_permission(self) -> None:
        thread = start("chatty", self.users["reviewer"])
        assert Client().get(f"/threads/{thread.pk}/").status_code == 302
        outsider = Client()
        outsider.force_login(self.users["outsider"])
        assert outsider.get(f"/threads/{thread.pk}/").status_code == 403

    def test_an_unknown_thread_is_not_found(self) -> None:
        assert self.client.get("/threads/00000000-0000-0000-0000-000000000000/").status_code == 404
        assert self.client.get("/threads/nope/").status_code == 404

    def test_a_suspended_sub_agent_shows_its_stack_and_the_card_inline(self) -> None:
        thread = start("boss", self.users["reviewer"], "Pay <b>them</b>")
        assert thread.status == "suspended"
        s = Suspension.objects.get(thread=thread)
        html = self.page(thread)
        assert '<ol id="stack"><li>boss</li><li>skill:writer</li></ol>' in html
        assert 'data-status="suspended"' in html
        assert f'id="s-{s.id}"' in html and 'data-action="approve"' in html
        # User text, agent text and tool input stay text (invariant 6).
        assert "Pay &lt;b&gt;them&lt;/b&gt;" in html
        assert "&lt;img src=x onerror=alert(1)&gt; Paying." in html
        assert "<img src=x" not in html
        for e in Event.objects.filter(thread=thread):
            # The call waiting for a decision is shown once, by its card.
            shown_by_card = e.type == "TOOL_CALLED" and e.payload["tool_use_id"] == s.tool_use_id
            assert (f'data-event="{e.id}"' in html) != shown_by_card, e.type
        # The agent's message is the line above the card: the card does not say it again
        # (app.css hides the prompt of a card marked said-above).
        raised = Event.objects.get(suspension=s, type="AGENT_SUSPENDED")
        assert f'class="entry tone-decision said-above" data-event="{raised.id}"' in html

    def test_status_and_stack_are_those_of_the_events_the_page_shows(self) -> None:
        # The client skips events the page already shows, so a status read from the thread row
        # a moment later than the events would never be corrected; the page derives it instead.
        thread = start("boss", self.users["reviewer"])
        Thread.objects.filter(pk=thread.pk).update(status="running")
        html = self.page(thread)
        assert 'id="thread-status" data-status="suspended"' in html
        assert '<ol id="stack"><li>boss</li><li>skill:writer</li></ol>' in html

    def test_a_completed_thread_shows_the_decision_and_the_tool_result(self) -> None:
        thread = start("boss", self.users["reviewer"])
        s = Suspension.objects.get(thread=thread)
        decisions.decide(s, self.users["teammate"], {"approved": True})
        Engine().advance(thread.pk)
        thread = Thread.objects.get(pk=thread.pk)
        html = self.page(thread)
        assert 'id="thread-status" data-status="completed"' in html
        assert "approved transfer_funds" in html and ">bob<" in html
        assert "Transferred 5" in html
        assert "All done." in html
        assert '<ol id="stack"></ol>' in html
        assert 'id="cancel" class="quiet-danger" hidden' in html

    def test_the_message_box_shows_only_while_the_thread_waits_for_input(self) -> None:
        thread = start("chatty", self.users["reviewer"])
        assert thread.status == "waiting_input"
        html = self.page(thread)
        assert '<form id="message-form" class="stack-form">' in html
        replies.post_message(thread.pk, "Blue", self.users["reviewer"])
        html = self.page(thread)
        assert '<form id="message-form" class="stack-form" hidden>' in html


class NewRunTestCase:
    @pytest.fixture(autouse=True)
    def setup(self, users: dict[str, Any], load_agents: Any) -> None:
        load_agents(AGENTS)
        self.users = users

    def test_it_starts_a_run_and_lands_on_its_page(self) -> None:
        client = Client()
        client.force_login(self.users["reviewer"])
        assert "chatty" in client.get("/runs/new/").content.decode()
        r = client.post("/runs/new/", {"agent": "chatty", "message": "Hello"})
        thread = Thread.objects.get()
        assert r.status_code == 302 and r["Location"] == f"/threads/{thread.pk}/"
        assert thread.created_by == self.users["reviewer"] and thread.title == "Hello"
        assert Event.objects.filter(thread=thread, type="THREAD_STARTED").exists()

    def test_it_says_what_is_missing(self) -> None:
        client = Client()
        client.force_login(self.users["reviewer"])
        r = client.post("/runs/new/", {"agent": "nobody", "message": "  "})
        assert r.status_code == 200
        assert not Thread.objects.exists()
        html = r.content.decode()
        assert "Select a valid choice" in html and "This field is required" in html

    def test_an_mcp_servers_agent_is_not_offered_nor_started(self, api: Any) -> None:
        # An MCP server's agent definition (mcp_gateway.upstreams.mirror) holds its policy;
        # its requests come from outside, and no model of the gateway runs it.
        AgentDefinition.objects.create(name="files", model=external.MODEL)
        client = Client()
        client.force_login(self.users["reviewer"])
        page = client.get("/runs/new/").content.decode()
        assert 'value="chatty"' in page and 'value="files"' not in page
        r = client.post("/runs/new/", {"agent": "files", "message": "Hello"})
        assert r.status_code == 200 and "Select a valid choice" in r.content.decode()
        r = api("operator").post("/api/threads", {"agent": "files", "message": "Hello"})
        assert r.status_code == 400
        assert r.json()["fields"]["agent"] == (
            "'files' is not run by the gateway: its requests come from outside."
        )
        assert not Thread.objects.exists()

    def test_an_outsider_cannot_start_runs(self) -> None:
        client = Client()
        client.force_login(self.users["outsider"])
        assert client.post("/runs/new/", {"agent": "chatty", "message": "Hi"}).status_code == 403
        assert not Thread.objects.exists()
