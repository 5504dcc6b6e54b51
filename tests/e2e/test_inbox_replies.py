"""In Chromium: a thread whose agent asked a question appears in the inbox next to the approvals,
live, with an answer box; answering there runs the thread on and takes the card away."""

from typing import Any

import pytest
from playwright.sync_api import expect

from agents.models import Event, Thread
from tests.conftest import wait_for
from tests.e2e.conftest import Site

pytestmark = [pytest.mark.e2e, pytest.mark.worker]

AGENTS = """
agents:
  - name: clerk
    model: scripted
    description: Files a form.
    script:
      - text: "Which form: <b>A</b> or B?"
      - tool_calls:
          - {name: complete, input: {result: Filed.}}
  - name: desk
    model: scripted
    sub_agents: [clerk]
    script:
      - tool_calls:
          - {name: use_agent, input: {name: clerk, message: file it}}
      - text: All filed.
"""


class InboxRepliesTestCase:
    @pytest.fixture(autouse=True)
    def setup(self, site: Site, load_agents: Any) -> None:
        load_agents(AGENTS)
        self.site = site
        self.api = site.api("reviewer")

    def start(self) -> str:
        r = self.api.post("/api/threads", {"agent": "desk", "message": "go"})
        assert r.status_code == 201, r.content
        return r.json()["id"]

    def test_a_question_arrives_live_and_is_answered_from_the_inbox(self) -> None:
        page = self.site.login("reviewer")
        expect(page.locator("#connection")).to_have_attribute("data-state", "live")
        tid = self.start()
        card = page.locator(f"#r-{tid}")
        expect(card).to_be_visible(timeout=15000)
        # The agent's text is text: the markup shows as typed, nothing is rendered from it.
        expect(card.locator(".question")).to_have_text("Which form: <b>A</b> or B?")
        assert card.locator(".question b").count() == 0
        expect(card.locator(".lineage")).to_have_text("agent:clerk")
        expect(page.locator("#pending-count")).to_have_text("1")
        # The REST list of what waits for a person has it too.
        waiting = self.api.get("/api/threads", waiting="true").json()["results"]
        assert [t["id"] for t in waiting] == [tid]
        self.site.shoot(page, "inbox-reply-desktop")
        card.locator("textarea").fill("Form A, please.")
        card.locator("button[type=submit]").click()
        expect(card).to_have_count(0)
        wait_for(
            lambda: Thread.objects.filter(pk=tid, status="completed").exists(),
            what="the thread to complete after the reply",
        )
        expect(page.locator("#pending-count")).to_have_text("0")
        expect(page.locator("#empty")).to_be_visible()

    def test_a_waiting_thread_is_on_the_page_after_a_reload(self) -> None:
        tid = self.start()
        wait_for(
            lambda: Thread.objects.filter(pk=tid, status="waiting_input").exists(),
            what="the question",
        )
        page = self.site.login("reviewer", viewport={"width": 390, "height": 844})
        card = page.locator(f"#r-{tid}")
        expect(card).to_be_visible()
        expect(card.locator(".question")).to_have_text("Which form: <b>A</b> or B?")
        self.site.shoot(page, "inbox-reply-phone")
        # The page's socket caught up and the card it drew again from its replay is in place
        # (the page starts GAP_WAIT behind: a replayed INPUT_REQUIRED whose card is fetched
        # after the change below would take the card away before the refusal is shown).
        expect(page.locator("#connection")).to_have_attribute("data-state", "live")
        asked = Event.objects.filter(thread_id=tid, type="INPUT_REQUIRED").latest("id").pk
        page.wait_for_function(
            "id => (window.__gateway.initialCursor >= id || window.__gateway.applied.includes(id))"
            " && window.GatewaySwap.inFlight() === 0",
            arg=asked,
        )
        # A reply the agent does not accept is refused with the reason; nothing changes.
        card.locator("textarea").fill("x" * 10)
        Thread.objects.filter(pk=tid).update(status="completed")  # answered meanwhile elsewhere
        card.locator("button[type=submit]").click()
        expect(card.locator(".notice")).to_contain_text("not waiting for input")
