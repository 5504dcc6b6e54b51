"""A request whose agent changed after it was made, in Chromium: the card says how, and
approving needs the reviewer's explicit confirmation (agents.versions)."""

from typing import Any

import pytest
from playwright.sync_api import expect

from agents.models import Suspension
from tests.conftest import wait_for
from tests.e2e.conftest import PHONE, Site, off_the_loop

pytestmark = [pytest.mark.e2e, pytest.mark.worker]


def agents(description: str) -> str:
    return f"""
agents:
  - name: versioned
    description: {description}
    model: scripted
    tools: [transfer_funds]
    tool_overrides:
      transfer_funds: {{execution_mode: blocking, timeout: 600}}
    script:
      - text: Paying the supplier.
        tool_calls:
          - {{name: transfer_funds, input: {{from_account: A-1, to_account: B-2, amount: 90}}}}
      - text: Done.
        if_error:
          text: Not paid.
"""


class VersionCardTestCase:
    @pytest.fixture(autouse=True)
    def setup(self, site: Site, load_agents: Any) -> None:
        self.load = load_agents
        load_agents(agents("Pays suppliers."))
        self.site = site

    def test_approving_a_request_of_a_changed_agent_needs_a_confirmation(self) -> None:
        r = self.site.api("teammate").post("/api/threads", {"agent": "versioned", "message": "pay"})
        assert r.status_code == 201, r.content
        s = wait_for(
            lambda: Suspension.objects.filter(thread_id=r.json()["id"]).first(),
            timeout=30,
            what="the request",
        )
        # The agent file is loaded again with other content while the request waits.
        off_the_loop(lambda: self.load(agents("Pays suppliers from the <b>new</b> account.")))

        page = self.site.login("reviewer")
        card = page.locator(f"#s-{s.id}")
        warning = card.locator(".version-warning")
        expect(warning).to_be_visible()
        expect(warning).to_contain_text("made under version 1 of versioned")
        expect(warning).to_contain_text("now at version 2 (changed: description)")
        self.site.shoot(page, "version-card-desktop")

        # Approving without the confirmation is refused and says why; nothing is decided.
        card.locator("[data-action=approve]").click()
        expect(card.locator(".notice")).to_contain_text("Not approved yet")
        s.refresh_from_db()
        assert s.status == Suspension.Status.PENDING

        card.locator("input[name=confirm-version]").check()
        card.locator("[data-action=approve]").click()
        # Decided, the card leaves the inbox for a line saying so (static/js/inbox.js).
        expect(page.locator(f"#gone-{s.id} .outcome")).to_have_text("approved by alice")
        wait_for(
            lambda: Suspension.objects.get(pk=s.pk).status == Suspension.Status.APPROVED,
            what="the approval",
        )

        phone = self.site.login("teammate", viewport=PHONE)
        phone.goto(self.site.url(f"/threads/{s.thread_id}/"))
        self.site.shoot(phone, "version-card-thread-phone")
