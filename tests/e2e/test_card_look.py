"""How long a reviewer looked (issue 41), measured from the page in Chromium: the inbox tells
the socket which cards are on screen, the server keeps the first moment each reviewer had
each card (presence.models.CardView), and the metrics count the decision's look from it."""

from typing import Any

import pytest
from playwright.sync_api import expect

from agents.models import Suspension
from presence.models import CardView
from tests.conftest import wait_for
from tests.e2e.conftest import Site
from tests.e2e.test_inbox import AGENTS, card, gone, pending_of, start

pytestmark = [pytest.mark.e2e, pytest.mark.worker]


class CardLookTestCase:
    @pytest.fixture(autouse=True)
    def setup(self, site: Site, load_agents: Any) -> None:
        load_agents(AGENTS)
        self.site = site
        self.api = site.api("reviewer")

    def test_the_first_moment_a_card_is_on_screen_starts_the_look(self) -> None:
        page = self.site.login("reviewer")
        tid = start(self.api, "payer")
        s = pending_of(tid)
        expect(card(page, s)).to_be_visible()
        seen = wait_for(
            lambda: CardView.objects.filter(suspension=s, user__username="alice").first(),
            what="the page to report the card on screen",
        )
        # Another page of the same reviewer does not move it.
        other = self.site.login("reviewer")
        expect(card(other, s)).to_be_visible()
        expect(other.locator("#connection")).to_have_attribute("data-state", "live")

        card(page, s).get_by_role("button", name="Approve", exact=True).click()
        expect(gone(page, s).locator(".outcome")).to_have_text("approved by alice")

        decided = Suspension.objects.get(pk=s.pk)
        assert CardView.objects.get(pk=seen.pk).first_shown_at == seen.first_shown_at
        assert CardView.objects.filter(suspension=s).count() == 1
        assert seen.first_shown_at <= decided.decided_at
        found = self.site.api("admin").get("/api/metrics/tiers", window="1h").json()
        (alice,) = found["reviewers"]
        assert (alice["reviewer"], alice["decisions"], alice["with_look"]) == ("alice", 1, 1)
        looked = (decided.decided_at - seen.first_shown_at).total_seconds()
        assert alice["median_look_seconds"] == round(looked, 3)
