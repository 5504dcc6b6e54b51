"""Two reviewers, two devices, one decision: the other sees it live and learns who won."""

from typing import Any

import pytest
from playwright.sync_api import expect

from agents.models import Event, Suspension
from tests.e2e.conftest import PHONE, Site
from tests.e2e.test_inbox import AGENTS, card, gone, pending_of, start

pytestmark = [pytest.mark.e2e, pytest.mark.worker]


class TwoReviewersTestCase:
    @pytest.fixture(autouse=True)
    def setup(self, site: Site, load_agents: Any) -> None:
        load_agents(AGENTS)
        self.site = site
        self.api = site.api("reviewer")

    def test_one_approves_and_the_other_s_card_updates_and_disables(self) -> None:
        alice = self.site.login("reviewer")
        bob = self.site.login("teammate")
        tid = start(self.api, "payer")
        s = pending_of(tid)
        for page in (alice, bob):
            expect(card(page, s)).to_be_visible()
        # Bob starts a rejection, then Alice approves first.
        bob_card = card(bob, s)
        bob_card.get_by_role("button", name="Reject…").click()
        bob_card.locator("input[name=reason]").fill("too much")
        card(alice, s).get_by_role("button", name="Approve", exact=True).click()
        expect(gone(alice, s).locator(".outcome")).to_have_text("approved by alice")

        # Bob's card leaves his inbox, half-written rejection and all, saying who decided.
        expect(gone(bob, s).locator(".outcome")).to_have_text("approved by alice")
        expect(bob_card).to_have_count(0)
        expect(gone(bob, s).get_by_role("button")).to_have_count(0)
        expect(bob).to_have_title("(0) Inbox · Approval gateway")

    def test_a_conflicting_decision_shows_the_recorded_outcome(self) -> None:
        alice = self.site.login("reviewer")
        bob = self.site.login("teammate", viewport=PHONE)
        tid = start(self.api, "payer")
        s = pending_of(tid)
        expect(card(bob, s)).to_be_visible()
        # Bob's page stops hearing the server, so his card is stale when he decides.
        bob.evaluate("() => { window.WebSocket = function () { throw new Error('offline'); }; }")
        bob.evaluate("() => window.__gateway.socket.close()")
        expect(card(alice, s)).to_be_visible()
        card(alice, s).get_by_role("button", name="Reject…").click()
        card(alice, s).locator("input[name=reason]").fill("wrong account")
        card(alice, s).get_by_role("button", name="Reject", exact=True).click()
        expect(gone(alice, s).locator(".outcome")).to_have_text("rejected by alice: wrong account")
        expect(card(bob, s).locator(".status")).to_have_text("pending")

        card(bob, s).get_by_role("button", name="Approve", exact=True).click()
        # The recorded outcome replaces his card: the line says who decided, and how.
        expect(gone(bob, s).locator(".outcome")).to_have_text("rejected by alice: wrong account")
        expect(card(bob, s)).to_have_count(0)
        s.refresh_from_db()
        assert s.status == "rejected" and s.decided_by.username == "alice"
        assert Event.objects.filter(suspension=s, type="SUSPENSION_DECIDED").count() == 1
        assert Suspension.objects.filter(thread_id=tid, status="approved").count() == 0
