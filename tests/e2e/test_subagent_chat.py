"""Chatting with sub-agents on the thread page: the breadcrumb follows the stack live."""

from typing import Any

import pytest
from playwright.sync_api import expect

from agents.models import Suspension, Thread
from tests.conftest import operator_of, wait_for
from tests.e2e.conftest import Site

pytestmark = [pytest.mark.e2e, pytest.mark.worker]

AGENTS = """
agents:
  - name: chief
    model: scripted
    sub_agents: [writer]
    script:
      - text: Handing over to the writer.
        tool_calls:
          - {name: use_skill, input: {name: writer, message: Draft the release notes.}}
      - text: Chief is done.
  - name: writer
    model: scripted
    sub_agents: [research]
    script:
      - text: Who are the notes for?
      - tool_calls:
          - {name: use_agent, input: {name: research, message: Publish the notes.}}
      - text: Research answered. Anything else?
      - tool_calls:
          - {name: complete, input: {result: Draft ready.}}
  - name: research
    model: scripted
    tools: [displayConfirmation]
    script:
      - text: Which version?
      - text: Publishing needs approval.
        tool_calls:
          - {name: displayConfirmation, input: {action: Publish the notes}}
      - tool_calls:
          - {name: complete, input: {result: Notes published.}}
"""


class SubAgentChatTestCase:
    @pytest.fixture(autouse=True)
    def setup(self, site: Site, api: Any, load_agents: Any) -> None:
        load_agents(AGENTS)
        self.site = site
        self.api = api("reviewer")

    def test_the_user_talks_to_each_sub_agent_and_the_breadcrumb_follows_the_stack(self) -> None:
        r = operator_of(self.api).post(
            "/api/threads", {"agent": "chief", "message": "Notes for 2.0, please."}
        )
        tid = r.json()["id"]
        wait_for(
            lambda: Thread.objects.filter(pk=tid, status="waiting_input").exists(),
            what="the writer's question",
        )
        page = self.site.login("reviewer")
        page.goto(self.site.url(f"/threads/{tid}/"))
        expect(page.locator("#connection")).to_have_attribute("data-state", "live")
        crumbs = page.locator("#stack li")
        transcript = page.locator("#transcript")
        form = page.locator("#message-form")
        expect(crumbs).to_have_text(["chief", "skill:writer"])
        expect(transcript).to_contain_text("Who are the notes for?")

        # The answer goes to the skill, which calls the research agent: a frame is pushed.
        form.locator("textarea").fill("For customers.")
        form.get_by_role("button", name="Send").click()
        expect(crumbs).to_have_text(["chief", "skill:writer", "agent:research"])
        expect(transcript.locator(".entry").last).to_contain_text("agent:research")
        expect(transcript.locator(".entry").last).to_contain_text("waits for your reply")
        expect(transcript.get_by_text("Which version?", exact=True)).to_have_count(1)
        expect(transcript.get_by_text("Who are the notes for?", exact=True)).to_have_count(1)
        self.site.shoot(page, "subagent-chat-depth-3")

        # The research agent asks for an approval; its card shows where in the stack it is.
        form.locator("textarea").fill("Version 2.0.")
        form.get_by_role("button", name="Send").click()
        s = wait_for(
            lambda: Suspension.objects.filter(thread_id=tid, status="pending").first(),
            what="the research agent's confirmation",
        )
        card = page.locator(f"#s-{s.id}")
        expect(card.locator(".agent")).to_have_text("research")
        expect(card.locator(".lineage")).to_have_text("via writer")
        card.get_by_role("button", name="Approve", exact=True).click()

        # The research agent completes: its frame is popped and the writer talks again.
        expect(crumbs).to_have_text(["chief", "skill:writer"])
        expect(transcript).to_contain_text("Research answered. Anything else?")
        expect(form).to_be_visible()
        form.locator("textarea").fill("Nothing else.")
        form.get_by_role("button", name="Send").click()

        # The writer completes, the main agent answers and the run ends with an empty stack.
        expect(page.locator("#thread-status")).to_have_attribute("data-status", "completed")
        expect(transcript).to_contain_text("Chief is done.")
        expect(crumbs).to_have_count(0)
        self.site.shoot(page, "subagent-chat-completed")
        assert Thread.objects.get(pk=tid).result == "Chief is done."
