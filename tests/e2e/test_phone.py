"""A reviewer on a phone: 390×844, nothing scrolls sideways, every tap target is 44 px or more."""

from typing import Any

import pytest
from playwright.sync_api import expect

from agents.models import Suspension, Thread
from tests.conftest import wait_for
from tests.e2e.conftest import PHONE, Site
from tests.e2e.test_inbox import AGENTS, card, gone, pending_of, start

pytestmark = [pytest.mark.e2e, pytest.mark.worker]

# Controls a finger must hit; links inside running text are exempt, as WCAG 2.5.5 allows.
SMALL_TARGETS = """() => {
  const targets = document.querySelectorAll(
    "button, select, input:not([type=hidden]), textarea, summary, " +
    ".nav a, .brand, .thread-link, .exports a, .pager a"
  );
  return Array.from(targets)
    .filter(el => el.getClientRects().length && getComputedStyle(el).visibility !== "hidden")
    .map(el => [el.outerHTML.slice(0, 80), el.getBoundingClientRect()])
    .filter(([, r]) => r.height < 44 || r.width < 44)
    .map(([html, r]) => `${html} ${Math.round(r.width)}x${Math.round(r.height)}`);
}"""


def assert_fits_a_phone(page: Any) -> None:
    width = page.evaluate("() => [document.documentElement.scrollWidth, window.innerWidth]")
    assert width[0] <= width[1], f"{page.url} scrolls sideways: {width}"
    assert page.evaluate(SMALL_TARGETS) == [], page.url


# The narrowest phones in use: the bar must still be one line.
NARROW = {"width": 320, "height": 640}


def assert_one_line_bar(page: Any) -> None:
    """The top bar is one line (a tap target's height and its padding): a second line would
    push the first card down (the bar keeps Inbox and New run; its menu has the rest)."""
    bar = page.evaluate("() => document.querySelector('.top').getBoundingClientRect().height")
    assert bar < 2 * 44, f"{page.url}: the top bar is {bar} px high"


class PhoneTestCase:
    @pytest.fixture(autouse=True)
    def setup(self, site: Site, load_agents: Any) -> None:
        load_agents(AGENTS)
        self.site = site
        self.api = site.api("reviewer")

    def phone(self, who: str = "reviewer") -> Any:
        return self.site.login(who, viewport=PHONE, is_mobile=True, has_touch=True)

    def test_open_reload_approve_and_the_state_survives_the_reload(self) -> None:
        tid = start(self.api, "payer")
        s = pending_of(tid)
        mischief = start(self.api, "mischief")
        pending_of(mischief)
        page = self.phone()
        expect(card(page, s)).to_be_visible()
        assert_fits_a_phone(page)
        assert_one_line_bar(page)
        self.site.shoot(page, "inbox-phone")

        page.reload()
        expect(card(page, s)).to_be_visible()
        expect(page).to_have_title("(2) Inbox · Approval gateway")
        card(page, s).get_by_role("button", name="Approve", exact=True).tap()
        expect(gone(page, s).locator(".outcome")).to_have_text("approved by alice")

        page.reload()
        expect(page.locator("#connection")).to_have_attribute("data-state", "live")
        expect(page).to_have_title("(1) Inbox · Approval gateway")
        assert page.locator(f"#s-{s.id}").count() == 0  # decided: no longer in the inbox
        assert Suspension.objects.get(pk=s.pk).status == "approved"
        wait_for(lambda: Thread.objects.get(pk=tid).status == "completed")

        page.goto(self.site.url(f"/threads/{tid}/"))
        expect(page.locator("#thread-status")).to_have_text("completed")
        expect(card(page, s).locator(".outcome")).to_have_text("approved by alice")
        assert_fits_a_phone(page)
        self.site.shoot(page, "thread-phone")

    def test_every_page_fits_a_phone(self) -> None:
        tid = start(self.api, "mischief")
        s = pending_of(tid)
        page = self.phone("admin")
        expect(card(page, s)).to_be_visible()
        card(page, s).get_by_role("button", name="Edit…").tap()
        card(page, s).get_by_role("button", name="Reject…").tap()
        assert_fits_a_phone(page)
        for path in (f"/threads/{tid}/", "/runs/new/", "/audit/"):
            page.goto(self.site.url(path))
            assert_fits_a_phone(page)
        self.site.shoot(page, "audit-phone")
        page.context.clear_cookies()
        page.goto(self.site.url("/login/"))
        assert_fits_a_phone(page)

    def test_the_bar_is_one_line_even_narrow_and_its_menu_has_the_other_pages(self) -> None:
        for who, viewport in (("reviewer", NARROW), ("admin", PHONE), ("admin", NARROW)):
            page = self.site.login(who, viewport=viewport, is_mobile=True, has_touch=True)
            assert_one_line_bar(page)
            bar = page.locator(".top")
            expect(bar.get_by_role("link", name="Inbox")).to_be_visible()
            expect(bar.get_by_role("link", name="Email")).to_have_count(0)  # in the closed menu
            bar.locator("summary", has_text="Menu").tap()
            expect(bar.get_by_role("link", name="Email")).to_be_visible()
            assert_fits_a_phone(page)
        self.site.shoot(page, "menu-phone")
        expect(bar.get_by_role("link", name="Metrics")).to_be_visible()
        bar.get_by_role("link", name="Audit").tap()
        expect(page).to_have_title("Audit trail · Approval gateway")
        assert_one_line_bar(page)
        bar.locator("summary", has_text="Menu").tap()
        bar.get_by_role("button", name="Log out").tap()
        expect(page).to_have_url(self.site.url("/login/"))
