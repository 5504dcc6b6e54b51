"""In Chromium: a right-to-left override in a tool argument is shown as a marker, not applied."""

from typing import Any

import pytest
from playwright.sync_api import expect

from agents.models import Suspension
from tests.conftest import operator_of, wait_for
from tests.e2e.conftest import Site

pytestmark = [pytest.mark.e2e, pytest.mark.worker]

AGENTS = """
agents:
  - name: trickster
    model: scripted
    tools: [transfer_funds]
    script:
      - text: "Paying account \\u202e9876 5432 now."
        tool_calls:
          - name: transfer_funds
            input: {from_account: ACC-1, to_account: "DE44 \\u202e9876 5432", amount: 5}
      - text: Done.
"""
RLO = "\u202e"


class ControlCharsTestCase:
    @pytest.fixture(autouse=True)
    def setup(self, site: Site, load_agents: Any) -> None:
        load_agents(AGENTS)
        self.site = site
        self.api = site.api("reviewer")

    def check_card(self, card: Any) -> None:
        expect(card.locator(".args .ctl")).to_have_text("[U+202E]")
        expect(card.locator(".args")).to_contain_text("DE44 [U+202E]9876 5432")
        expect(card.locator(".prompt .ctl")).to_have_text("[U+202E]")
        assert RLO not in card.locator(".args").text_content()
        assert RLO not in card.locator(".prompt").text_content()
        # The editor holds the same JSON with the character escaped: visible, and unchanged (a
        # card the server drew makes its editor when first opened, static/js/cards.js `boxes`).
        card.locator("[data-action=edit]").click()
        assert "\\u202e9876" in card.locator("textarea[name=args]").input_value()
        card.locator("[data-action=edit]").click()

    def test_a_card_shows_the_override_as_a_marker(self) -> None:
        page = self.site.login("reviewer")
        expect(page.locator("#connection")).to_have_attribute("data-state", "live")
        r = operator_of(self.api).post("/api/threads", {"agent": "trickster", "message": "go"})
        assert r.status_code == 201, r.content
        tid = r.json()["id"]
        s = wait_for(
            lambda: Suspension.objects.filter(thread_id=tid, status="pending").first(),
            what="the suspension",
        )
        card = page.locator(f"#s-{s.id}")
        # Built by the page's script from the socket's event...
        expect(card).to_be_visible()
        self.check_card(card)
        # ...and rendered by the server after a reload, and on the thread page.
        page.reload()
        self.check_card(page.locator(f"#s-{s.id}"))
        page.goto(self.site.url(f"/threads/{tid}/"))
        self.check_card(page.locator(f"#s-{s.id}"))
        expect(page.locator("#transcript .ctl").first).to_have_text("[U+202E]")
        assert RLO not in page.locator("#transcript").text_content()
        # An edited approval sends the argument as it was, override included: the editor
        # opens in JSON mode, where the character is escaped (a form field would apply it).
        box = page.locator(f"#s-{s.id}")
        box.locator("[data-action=edit]").click()
        editor = box.locator("textarea[name=args]")
        expect(editor).to_be_visible()
        editor.fill(editor.input_value().replace('"amount": 5', '"amount": 6'))
        box.get_by_role("button", name="Review changes").click()
        box.get_by_role("button", name="Approve edited").click()
        expect(box.locator(".status")).to_have_text("approved")
        decided = Suspension.objects.get(pk=s.pk)
        assert decided.modified_args["to_account"] == f"DE44 {RLO}9876 5432"
        assert decided.modified_args["amount"] == 6
