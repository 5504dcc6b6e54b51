"""Standing grants in Chromium (agents.grants): after three identical approvals the card
proposes a grant; the reviewer reviews the prefilled form and grants with one press; the next
such request is approved by the grant, and the Grants page lists it and revokes it."""

from typing import Any

import pytest
from playwright.sync_api import expect

from agents.models import Suspension
from tests.e2e.conftest import PHONE, Site
from tests.e2e.test_accessibility import violations

pytestmark = [pytest.mark.e2e]


def pay(n: int, amount: int = 120) -> dict[str, Any]:
    return {
        "agent": "billing-bot",
        "run_id": "run-1",
        "tool": "pay",
        "arguments": {"amount": amount, "currency": "EUR", "to": "ACME"},
        "schema": {"type": "object"},
        "prompt": "Pay ACME's invoice?",
        "timeout": 600,
        "idempotency_key": f"pay-{n}",
    }


class GrantCardTestCase:
    @pytest.fixture(autouse=True)
    def setup(self, site: Site) -> None:
        self.site = site
        self.agent = site.api("operator")
        self.n = 0

    def request(self) -> dict[str, Any]:
        self.n += 1
        r = self.agent.post("/api/requests", pay(self.n))
        assert r.status_code == 201, r.text
        return r.json()

    def test_the_proposal_the_grant_and_the_grants_page(self) -> None:
        bob = self.site.api("teammate")
        for _ in range(3):
            body = self.request()
            path = f"/api/threads/{body['thread']}/suspensions/{body['id']}/resume"
            assert bob.post(path, {"approved": True}).status_code == 202
        fourth = self.request()
        page = self.site.login("reviewer", viewport=PHONE)
        card = page.locator(f"#s-{fourth['id']}")
        expect(card.locator(".grant-proposal")).to_contain_text("approved 3 times")
        card.locator(".grant-proposal [data-action=grant]").click()
        box = card.locator(".grant-box")
        expect(box).to_be_visible()
        # Proposed: each argument's condition ticked, as the agent sent it.
        currency = box.locator(".grant-condition[data-arg=currency]")
        expect(currency.locator("input[name=grant-on]")).to_be_checked()
        expect(currency.locator("input[name=grant-value]")).to_have_value("EUR")
        amount = box.locator(".grant-condition[data-arg=amount]")
        amount.locator("select[name=grant-op]").select_option("<=")
        amount.locator("input[name=grant-value]").fill("500")
        box.locator(".grant-condition[data-arg=to] input[name=grant-on]").uncheck()
        box.locator("input[name=grant-uses]").fill("5")
        self.site.shoot(page, "grants-card-phone")
        # The open form passes the accessibility check the pages pass (labels, contrast).
        assert violations(page, self.site.server.url) == []
        # Pressed from the keyboard: a full-page screenshot leaves the page scrolling back for
        # a moment, under a mouse's press and release.
        box.locator("[data-action=confirm-grant]").focus()
        with page.expect_response(lambda r: r.url.endswith("/resume")) as answered:
            page.keyboard.press("Enter")
        assert answered.value.status == 202
        expect(card).to_have_count(0)  # decided: it leaves the inbox
        assert Suspension.objects.get(pk=fourth["id"]).status == "approved"
        [made] = self.site.api("reviewer").get("/api/grants").json()["grants"]
        assert made["conditions_text"] == 'amount <= 500 and currency == "EUR"'
        assert made["max_uses"] == 5 and made["granted_by"] == "alice"
        # The next such request is approved at once, by the grant.
        assert self.request()["status"] == "approved"

        page.goto(self.site.url("/grants/"))
        item = page.locator(f"#g-{made['id']}")
        expect(item).to_contain_text('amount <= 500 and currency == "EUR"')
        expect(item.locator(".grant-uses")).to_have_text("1 of 5 used")
        self.site.shoot(page, "grants-page-phone")
        item.locator("button", has_text="Revoke").click()
        expect(page.locator(".grant-list.ended .badge")).to_have_text("revoked")
        assert self.request()["status"] == "pending"
        assert not self.site.errors, self.site.errors
