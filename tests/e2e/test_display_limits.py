"""In Chromium: an agent whose tool argument is 1 MB leaves the inbox and the thread page usable
(issue 31). The card shows a cut argument, says how much was cut and links to the whole; it can
be approved, and it refuses an edit that would send the cut text."""

from typing import Any

import pytest
from playwright.sync_api import expect

from agents.models import Suspension
from tests.conftest import operator_of, wait_for
from tests.e2e.conftest import PHONE, Site
from tests.e2e.test_inbox import card

pytestmark = [pytest.mark.e2e, pytest.mark.worker]

MB = 1024 * 1024
BODY = "w" * MB
AGENTS = f"""
agents:
  - name: runaway
    model: scripted
    tools: [send_email]
    script:
      - text: I will mail the whole archive.
        tool_calls:
          - name: send_email
            input: {{to: all@example.com, subject: Archive, body: {BODY}}}
      - text: Sent.
"""
SIZES = [
    pytest.param({"viewport": {"width": 1280, "height": 800}}, id="desktop"),
    pytest.param({"viewport": PHONE, "is_mobile": True, "has_touch": True}, id="phone"),
]


class DisplayLimitsTestCase:
    @pytest.fixture(autouse=True)
    def setup(self, site: Site, load_agents: Any) -> None:
        load_agents(AGENTS)
        self.site = site
        self.api = site.api("reviewer")

    def start(self) -> tuple[str, Suspension]:
        r = operator_of(self.api).post("/api/threads", {"agent": "runaway", "message": "go"})
        assert r.status_code == 201, r.content
        tid = r.json()["id"]
        s = wait_for(
            lambda: Suspension.objects.filter(thread_id=tid, status="pending").first(),
            what="the suspension",
        )
        return tid, s

    def check_cut(self, box: Any, s: Suspension) -> None:
        body = box.locator(".fields tr[data-field=body] td")
        expect(body).to_contain_text("wwww")
        expect(body.locator(".cut")).to_contain_text("more bytes — show the whole value")
        link = body.locator(".cut a")
        expect(link).to_have_attribute("href", f"/api/suspensions/{s.id}")
        assert len(body.text_content()) < 5000
        expect(box.locator(".args-cut")).to_be_visible()

    @pytest.mark.parametrize("size", SIZES)
    def test_it_loads_the_inbox_and_thread_page_with_the_card_decidable(
        self, size: dict[str, Any], request: Any
    ) -> None:
        name = request.node.callspec.id
        page = self.site.login("reviewer", **size)
        expect(page.locator("#connection")).to_have_attribute("data-state", "live")
        tid, s = self.start()
        # Live, built from the socket's event by the page's scripts.
        box = card(page, s)
        expect(box).to_be_visible(timeout=10000)
        self.check_cut(box, s)
        # Drawn by the server on a fresh load.
        page.reload(wait_until="load")
        box = card(page, s)
        self.check_cut(box, s)
        assert len(page.content().encode()) < MB
        self.site.shoot(page, f"huge-argument-inbox-{name}")
        # An edit would send the cut text: the card refuses it and says why.
        box.locator("[data-action=edit]").click()
        expect(box.locator(".notice")).to_contain_text("cannot be edited on this page")
        expect(box.locator(".edit-box")).to_be_hidden()
        # The whole value is there as text.
        whole = self.api.get(f"/api/suspensions/{s.id}").json()
        assert whole["input"]["body"] == BODY

        page.goto(self.site.url(f"/threads/{tid}/"), wait_until="load")
        on_thread = card(page, s)
        self.check_cut(on_thread, s)
        assert len(page.content().encode()) < MB
        self.site.shoot(page, f"huge-argument-thread-{name}")
        on_thread.locator("[data-action=approve]").click()
        expect(on_thread.locator(".outcome")).to_have_text("approved by alice")
        wait_for(lambda: Suspension.objects.get(pk=s.pk).status == "approved", what="the approval")
