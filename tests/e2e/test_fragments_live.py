"""The server renders, the page swaps (issue 26): a card that arrives or changes live is the
server's card, asked for when its event comes (GET /fragments/...), at desktop and phone sizes;
the socket carries events, not HTML."""

from typing import Any

import pytest
from playwright.sync_api import expect

from agents.models import Suspension
from tests.e2e.conftest import Site
from tests.e2e.test_cards import AGENTS, viewports
from tests.e2e.test_inbox import card, gone, pending_of, start

pytestmark = [pytest.mark.e2e, pytest.mark.worker]


def asked(requests: list[str], part: str) -> list[str]:
    return [url for url in requests if part in url]


class FragmentsLiveTestCase:
    @pytest.fixture(autouse=True)
    def setup(self, site: Site, load_agents: Any) -> None:
        load_agents(AGENTS)
        self.site = site
        self.api = site.api("reviewer")
        self.teammate = site.api("teammate")

    @viewports()
    def test_a_live_card_arrives_and_changes_as_the_server_renders_it(
        self, size: dict[str, Any], request: Any
    ) -> None:
        page = self.site.login("reviewer", **size)
        requests: list[str] = []
        page.on("request", lambda r: requests.append(r.url))
        expect(page.locator("#connection")).to_have_attribute("data-state", "live")
        page.evaluate("window.__notReloaded = true")

        tid = start(self.api, "payer")
        s = pending_of(tid)
        box = card(page, s)
        expect(box).to_be_visible()
        # Asked for when AGENT_SUSPENDED came: the server's card, as the inbox renders it.
        assert asked(requests, f"/fragments/suspensions/{s.id}/card?in=inbox")
        expect(box.locator(".summary")).to_have_text("Transfer 200 EUR from ACC-1 to ACC-2")
        expect(box).to_have_attribute("data-status", "pending")
        expect(page.locator("#pending-count")).to_have_text("1")
        expect(page).to_have_title("(1) Inbox · Approval gateway")
        piece = page.request.get(self.site.url(f"/fragments/suspensions/{s.id}/card?in=inbox"))
        assert piece.ok and f'id="s-{s.id}"' in piece.text()

        # Someone else moves the deadline: the card changes in place, their reason as text.
        r = self.teammate.post(
            f"/api/threads/{tid}/suspensions/{s.id}/extend",
            {"seconds": 900, "reason": "<b>ask finance</b>"},
        )
        assert r.status_code == 200, r.content
        extension = box.locator(".extension")
        expect(extension).to_be_visible()
        expect(extension.locator(".extension-reason")).to_have_text("<b>ask finance</b>")
        expect(extension.locator(".extension-by")).to_have_text("bob")
        expect(box.locator(".extension-reason b")).to_have_count(0)
        self.site.shoot(page, f"fragments-live-card-{request.node.callspec.id}")

        # And decides it: the server's line takes the card's place.
        r = self.teammate.post(f"/api/threads/{tid}/suspensions/{s.id}/resume", {"approved": True})
        assert r.status_code == 202, r.content
        expect(gone(page, s).locator(".outcome")).to_have_text("approved by bob")
        expect(box).to_have_count(0)
        expect(page.locator("#pending-count")).to_have_text("0")
        expect(page).to_have_title("(0) Inbox · Approval gateway")
        assert page.evaluate("window.__notReloaded") is True
        # The socket brought events (ids), never HTML; each card request was the server's.
        applied = page.evaluate("window.__gateway.applied")
        assert applied and all(isinstance(i, int) for i in applied)
        assert len(applied) == len(set(applied))
        assert Suspension.objects.get(pk=s.pk).status == "approved"

    @viewports()
    def test_the_thread_page_swaps_in_the_servers_lines(
        self, size: dict[str, Any], request: Any
    ) -> None:
        page = self.site.login("reviewer", **size)
        tid = start(self.api, "payer")
        s = pending_of(tid)
        requests: list[str] = []
        page.on("request", lambda r: requests.append(r.url))
        page.goto(self.site.url(f"/threads/{tid}/"))
        expect(page.locator("#connection")).to_have_attribute("data-state", "live")
        expect(card(page, s)).to_be_visible()
        page.evaluate("window.__notReloaded = true")
        r = self.teammate.post(
            f"/api/threads/{tid}/suspensions/{s.id}/resume",
            {"approved": False, "reason": "<i>not</i> today"},
        )
        assert r.status_code == 202, r.content
        expect(card(page, s).locator(".outcome")).to_have_text("rejected by bob: <i>not</i> today")
        expect(page.locator("#transcript")).to_contain_text(
            "rejected transfer_funds: <i>not</i> today"
        )
        expect(page.locator("#transcript")).to_contain_text("I did not pay.")
        expect(page.locator("#thread-status")).to_have_attribute("data-status", "completed")
        expect(page.locator("#transcript i")).to_have_count(0)
        assert asked(requests, f"/fragments/threads/{tid}/entries?ids=")
        assert asked(requests, f"/fragments/threads/{tid}/state")
        assert asked(requests, f"/fragments/suspensions/{s.id}/card")
        assert page.evaluate("window.__notReloaded") is True
        # What the page swapped in is what the server renders on a reload.
        lines = page.locator("#transcript > li").evaluate_all(
            "els => els.map(e => e.dataset.event)"
        )
        page.reload()
        assert (
            page.locator("#transcript > li").evaluate_all("els => els.map(e => e.dataset.event)")
            == lines
        )
        self.site.shoot(page, f"fragments-live-thread-{request.node.callspec.id}")
