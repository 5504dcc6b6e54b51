"""Policy on the inbox card in Chromium (agents.policy): a reviewer who may not decide sees the
card read-only with why (they started the run; they already approved), the count of a quorum
("1 of 2 approvals") moves live in another reviewer's browser, and the last approval decides."""

from typing import Any

import pytest
from playwright.sync_api import expect

from agents.models import Suspension
from tests.conftest import wait_for
from tests.e2e.conftest import PHONE, Site

pytestmark = [pytest.mark.e2e, pytest.mark.worker]

DESKTOP = {"width": 1366, "height": 900}

AGENTS = """
agents:
  - name: twokeys
    description: Pays once two reviewers approve.
    model: scripted
    tools: [transfer_funds]
    tool_overrides:
      transfer_funds: {execution_mode: blocking, timeout: 600}
    policy: {quorum: 2}
    script:
      - text: "Paying <b>supplier</b> invoice 118."
        tool_calls:
          - {name: transfer_funds, input: {from_account: A-1, to_account: B-2, amount: 900}}
      - text: Paid.
        if_error:
          text: Not paid.
"""


class PolicyCardTestCase:
    @pytest.fixture(autouse=True)
    def setup(self, site: Site, load_agents: Any) -> None:
        load_agents(AGENTS)
        self.site = site

    def shoot(self, page: Any, name: str) -> None:
        self.site.shoot(page, name)

    def start(self, who: str) -> Suspension:
        r = self.site.api(who).post("/api/threads", {"agent": "twokeys", "message": "pay"})
        assert r.status_code == 201, r.content
        return wait_for(
            lambda: Suspension.objects.filter(thread_id=r.json()["id"]).first(),
            timeout=30,
            what="the request",
        )

    def test_a_quorum_counts_live_and_a_voter_sees_the_card_read_only(self) -> None:
        alice = self.site.login("reviewer", viewport=DESKTOP)
        bob = self.site.login("teammate", viewport=PHONE)
        for page in (alice, bob):
            expect(page.locator("#connection")).to_have_attribute("data-state", "live")
        s = self.start("operator")
        mine, theirs = alice.locator(f"#s-{s.id}"), bob.locator(f"#s-{s.id}")
        for card in (mine, theirs):
            expect(card).to_be_visible(timeout=5000)  # built from the socket's event
            expect(card.locator(".votes")).to_have_text("0 of 2 approvals")
            expect(card.locator("[data-action=approve]")).to_be_visible()

        mine.locator("[data-action=approve]").click()
        expect(mine.locator(".votes")).to_have_text("1 of 2 approvals")
        expect(mine.locator(".why-not")).to_have_text(
            "You already approved; waiting for 1 more approval."
        )
        expect(mine).to_have_class(lambda_has("read-only"))
        expect(mine.locator("[data-action=approve]")).to_be_hidden()
        expect(mine.locator("[data-action=reject]")).to_be_hidden()
        # In bob's browser the count moves by itself, and he may still decide.
        expect(theirs.locator(".votes")).to_have_text("1 of 2 approvals")
        expect(theirs.locator(".why-not")).to_be_hidden()
        expect(theirs.locator("[data-action=approve]")).to_be_visible()
        assert Suspension.objects.get(pk=s.pk).status == "pending"
        self.shoot(alice, "policy-quorum-desktop")
        self.shoot(bob, "policy-quorum-phone")

        # After a reload the server draws the same read-only card.
        alice.reload()
        expect(mine.locator(".votes")).to_have_text("1 of 2 approvals")
        expect(mine.locator(".why-not")).to_have_text(
            "You already approved; waiting for 1 more approval."
        )
        expect(mine.locator("[data-action=approve]")).to_be_hidden()

        theirs.locator("[data-action=approve]").click()
        # Decided: the card leaves both inboxes, a line saying who decided in its place.
        for page, card in ((alice, mine), (bob, theirs)):
            expect(page.locator(f"#gone-{s.id} .outcome")).to_have_text("approved by bob")
            expect(card).to_have_count(0)
        wait_for(lambda: Suspension.objects.get(pk=s.pk).status == "approved", what="the approval")

    def test_who_started_the_run_sees_the_card_read_only_with_why(self) -> None:
        alice = self.site.login("reviewer", viewport=DESKTOP)
        expect(alice.locator("#connection")).to_have_attribute("data-state", "live")
        s = self.start("reviewer")
        card = alice.locator(f"#s-{s.id}")
        why = "You started this run; someone else must decide it (four eyes)."
        expect(card.locator(".why-not")).to_have_text(why)
        expect(card.locator("[data-action=approve]")).to_be_hidden()
        alice.reload()
        expect(card.locator(".why-not")).to_have_text(why)
        expect(card.locator("[data-action=approve]")).to_be_hidden()
        expect(card.locator(".prompt")).to_have_text("Paying <b>supplier</b> invoice 118.")
        self.shoot(alice, "policy-four-eyes-desktop")
        phone = self.site.login("reviewer", viewport=PHONE)
        expect(phone.locator(f"#s-{s.id} .why-not")).to_have_text(why)
        self.shoot(phone, "policy-four-eyes-phone")


def lambda_has(name: str) -> Any:
    import re

    return re.compile(rf"(^|\s){re.escape(name)}(\s|$)")
