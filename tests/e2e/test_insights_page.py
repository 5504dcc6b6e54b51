"""The metrics page in Chromium, at desktop and phone sizes: a day of requests and a run through
the real worker, the live server's figures equal to its JSON summary, and the charts drawn
within the screen. Screenshots: test-artifacts/insights-desktop.png, insights-phone.png."""

from datetime import timedelta
from typing import Any

import pytest
from django.contrib.auth.models import User
from django.utils import timezone
from playwright.sync_api import expect

from agents.models import Thread
from tests.conftest import wait_for
from tests.e2e.conftest import PHONE, Site
from tests.e2e.test_inbox import AGENTS, pending_of, start
from tests.e2e.test_phone import assert_fits_a_phone
from tests.metrics import history

pytestmark = [pytest.mark.e2e, pytest.mark.worker]


class InsightsPageTestCase:
    @pytest.fixture(autouse=True)
    def setup(self, site: Site, load_agents: Any) -> None:
        load_agents(AGENTS)
        self.site = site
        now = timezone.now()
        history.day(now)
        history.suspension("support", now - timedelta(hours=3))  # pending in every window
        # The tiers of review: a rule, a grant, a model, people after a shadow model's advice.
        history.tiers(now, User.objects.get(username="alice"))
        # And one request of today, raised and approved through the API and the worker.
        api = site.api("reviewer")
        tid = start(api, "payer")
        s = pending_of(tid)
        r = api.post(f"/api/threads/{tid}/suspensions/{s.id}/resume", {"approved": True})
        assert r.status_code == 202
        wait_for(lambda: Thread.objects.get(pk=tid).status == "completed")
        self.admin = site.api("admin")

    def figures(self, window: str) -> dict[str, Any]:
        """The summary's figures, without the window's bounds (which move with the clock)."""
        r = self.admin.get("/api/metrics/conversations", window=window)
        return {k: v for k, v in r.json().items() if k not in ("since", "until")}

    def check(self, page: Any, window: str = "24h") -> None:
        """The page's figures are the JSON summary's. Requests leave the window as time goes
        by, so the page is read between two equal answers of the summary."""
        tiles = ("#figure-requests dd", "#figure-completion dd", "#figure-timeouts dd")
        for _ in range(3):
            before = self.figures(window)
            page.reload()
            shown = [page.locator(tile).inner_text() for tile in tiles]
            after = self.figures(window)
            if before == after:
                break
        assert before == after, "the window kept moving"
        requests, completion, timeouts = shown
        assert int(requests) == before["input_requests_total"]
        assert completion.endswith(" %") and timeouts.endswith(" %")
        assert float(completion[:-2]) == before["completion_rate"]
        assert float(timeouts[:-2]) == before["timeout_rate"]
        charts = page.locator(".chart svg")
        expect(charts).to_have_count(4)
        width = page.evaluate("() => window.innerWidth")
        for i in range(4):
            box = charts.nth(i).bounding_box()
            assert box and 0 <= box["x"] and box["x"] + box["width"] <= width
            assert box["height"] > 100
        expect(page.locator("#chart-requests rect.bar").first).to_be_visible()
        expect(page.locator("#chart-pending .line").first).to_be_visible()
        # The tiers of review under the charts (tests/metrics/test_tiers.py checks the figures).
        expect(page.locator("#tier-table tr.all")).to_contain_text("All agents")
        expect(page.locator("table.confusion")).to_have_count(1)
        expect(page.locator('#reviewer-table tr[data-reviewer="alice"] .quick')).to_have_text("1")

    def test_a_desktop_shows_the_figures_and_the_charts(self) -> None:
        page = self.site.login("admin")
        page.get_by_role("link", name="Metrics").click()
        expect(page).to_have_title("Metrics · Approval gateway")
        self.check(page)
        # Two charts side by side.
        first, second = (page.locator(".chart").nth(i).bounding_box() for i in range(2))
        assert first and second and first["y"] == second["y"]
        self.site.shoot(page, "insights-desktop")

        page.get_by_role("link", name="1h", exact=True).click()
        expect(page.get_by_role("link", name="1h", exact=True)).to_have_attribute(
            "aria-current", "page"
        )
        self.check(page, "1h")

    def test_a_phone_shows_them_in_one_column(self) -> None:
        page = self.site.login("admin", viewport=PHONE, is_mobile=True, has_touch=True)
        page.goto(self.site.url("/insights/"))
        self.check(page)
        first, second = (page.locator(".chart").nth(i).bounding_box() for i in range(2))
        assert first and second and second["y"] > first["y"] + first["height"]
        assert_fits_a_phone(page)
        self.site.shoot(page, "insights-phone")
        page.get_by_text("Figures per hour").tap()
        expect(page.locator("details.table tbody tr")).to_have_count(24)
        assert_fits_a_phone(page)

    def test_a_reviewer_is_refused(self) -> None:
        page = self.site.login("reviewer")
        expect(page.get_by_role("link", name="Metrics")).to_have_count(0)
        r = page.goto(self.site.url("/insights/"))
        assert r is not None and r.status == 403
