"""In Chromium: an event far over daphne's 1 MiB frame limit reaches the page as a summary, the
page fetches it whole and shows it within the display limits, and the socket goes on streaming."""

from typing import Any

import pytest
from playwright.sync_api import expect

from agents.models import Suspension
from tests.conftest import operator_of, wait_for
from tests.e2e.conftest import Site
from tests.e2e.test_inbox import gone

pytestmark = [pytest.mark.e2e, pytest.mark.worker]

NOTE = "n" * (2 * 1024 * 1024)
AGENTS = f"""
agents:
  - name: bulky
    model: scripted
    tools: [displayConfirmation]
    script:
      - tool_calls:
          - name: displayConfirmation
            input: {{action: Import the whole ledger, details: {NOTE}}}
      - text: Imported.
"""


class SocketBoundsTestCase:
    @pytest.fixture(autouse=True)
    def setup(self, site: Site, load_agents: Any) -> None:
        load_agents(AGENTS)
        self.site = site
        self.api = site.api("reviewer")

    def test_a_huge_event_is_fetched_whole_and_the_page_stays_live(self) -> None:
        page = self.site.login("reviewer")
        status = page.locator("#connection")
        expect(status).to_have_attribute("data-state", "live")
        r = operator_of(self.api).post("/api/threads", {"agent": "bulky", "message": "go"})
        assert r.status_code == 201, r.content
        tid = r.json()["id"]
        s = wait_for(
            lambda: Suspension.objects.filter(thread_id=tid, status="pending").first(),
            what="the suspension",
        )
        card = page.locator(f"#s-{s.id}")
        expect(card).to_be_visible(timeout=10000)
        # Fetched whole, shown within the display limits (approvals.excerpt): the whole
        # arguments are one link away.
        expect(card.locator(".args .cut a")).to_have_attribute("href", f"/api/suspensions/{s.id}")
        assert card.locator(".args").text_content().startswith('{\n  "action"')
        assert len(card.locator(".args").text_content()) < 5000
        expect(card.locator(".notice")).to_be_hidden()
        # The socket still streams: the next event (the decision) changes the card live.
        r = self.api.post(f"/api/threads/{tid}/suspensions/{s.id}/resume", {"approved": True})
        assert r.status_code == 202
        # The decided card leaves the inbox, a line saying who decided in its place.
        expect(gone(page, s).locator(".outcome")).to_have_text("approved by alice")
        expect(card).to_have_count(0)
        expect(status).to_have_attribute("data-state", "live")
        applied = page.evaluate("window.__gateway.applied")
        assert len(applied) == len(set(applied))
        assert page.evaluate("window.__gateway.connects") == 1  # never closed on the way
