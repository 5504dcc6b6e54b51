"""A press on a card is not lost to a redraw. The click goes to what both the press and the
release hit: a card drawn again (an event about it) or its presence bar put in between them
would take the reviewer's click nowhere, or elsewhere. static/js/swap.js holds a pressed card's
changes until the click is over (seen in CI: Approve clicked as the page went live, and nothing
happened)."""

from typing import Any

import pytest
from playwright.sync_api import expect

from agents.models import Suspension
from tests.e2e.conftest import Site
from tests.e2e.test_inbox import card, start
from tests.e2e.test_streaming_page import pending

pytestmark = [pytest.mark.e2e, pytest.mark.worker]

AGENTS = """
agents:
  - name: mover
    model: scripted
    tools: [displayConfirmation]
    script:
      - tool_calls:
          - {name: displayConfirmation, input: {action: Move the files}}
      - text: Moved.
"""


class PressedCardTestCase:
    @pytest.fixture(autouse=True)
    def setup(self, site: Site, load_agents: Any) -> None:
        load_agents(AGENTS)
        self.site = site

    def test_a_card_drawn_again_under_the_pointer_still_takes_the_click(self) -> None:
        page = self.site.login("reviewer")
        tid = start(self.site.api("reviewer"), "mover")
        s = pending(tid, "Move the files")
        page.goto(self.site.url(f"/threads/{tid}/"))
        expect(page.locator("#connection")).to_have_attribute("data-state", "live")
        box = card(page, s)
        approve = box.get_by_role("button", name="Approve", exact=True)
        expect(approve).to_be_enabled()
        # The presence bar comes with the socket's first PRESENCE message and moves the buttons:
        # measured once it is in, and the press checked to be on Approve.
        expect(box.get_by_role("button", name="Claim")).to_be_visible()
        at = approve.bounding_box()
        assert at is not None
        page.mouse.move(at["x"] + at["width"] / 2, at["y"] + at["height"] / 2)
        page.mouse.down()
        assert page.evaluate("document.activeElement.dataset.action") == "approve"

        # Between press and release, a teammate moves the deadline: the card is asked for again
        # and comes back with a line more, which moves the buttons down.
        with page.expect_response(lambda r: f"/fragments/suspensions/{s.id}/card" in r.url):
            r = self.site.api("teammate").post(
                f"/api/threads/{tid}/suspensions/{s.id}/extend",
                {"seconds": 900, "reason": "ask finance"},
            )
            assert r.status_code == 200, r.content
        page.wait_for_timeout(200)  # the fetched card is in hand; it is put in place now or held
        page.mouse.up()

        expect(box).to_have_attribute("data-status", "approved", timeout=15000)
        assert Suspension.objects.get(pk=s.pk).status == "approved"
        # The teammate's change is on the card too, drawn once the click was over.
        expect(box.locator(".extension")).to_be_visible()
        expect(box.locator(".extension-by")).to_have_text("bob")
