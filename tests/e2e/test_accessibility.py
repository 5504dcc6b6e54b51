"""Accessibility in Chromium: axe-core (static/vendor/axe-core) finds no serious or critical
violation on the inbox, thread, audit, new-run and login pages, at desktop and phone sizes, in
the light and the dark scheme; every page has a title and the favicon; focus is visible.
Screenshots of each go to test-artifacts/."""

import json
from datetime import timedelta
from typing import Any

import pytest
from django.utils import timezone
from playwright.sync_api import expect

from agents.models import Grant, Thread
from tests.conftest import wait_for
from tests.e2e.conftest import PHONE, Site
from tests.e2e.test_inbox import AGENTS, card, pending_of, start

pytestmark = [pytest.mark.e2e, pytest.mark.worker]

WIDE = {"width": 1366, "height": 900}
AXE = "/static/vendor/axe-core/axe.min.js"
# axe's own impact levels; "serious" and "critical" fail the page.
BLOCKING = ("serious", "critical")
RUN_AXE = """async () => {
  const result = await axe.run(document, { resultTypes: ["violations"] });
  return result.violations.map(v => ({
    id: v.id, impact: v.impact, help: v.help,
    nodes: v.nodes.slice(0, 5).map(n => n.target.join(" ") + " :: " + n.failureSummary),
  }));
}"""


def violations(page: Any, base: str) -> list[dict[str, Any]]:
    # From the site itself, as the CSP allows (no inline script is added).
    page.add_script_tag(url=base + AXE)
    found = page.evaluate(RUN_AXE)
    return [v for v in found if v["impact"] in BLOCKING]


class AccessibilityTestCase:
    @pytest.fixture(autouse=True)
    def setup(self, site: Site, load_agents: Any) -> None:
        load_agents(AGENTS)
        self.site = site
        self.api = site.api("reviewer")

    def context(self, size: str, scheme: str, who: str | None) -> Any:
        options: dict[str, Any] = {"color_scheme": scheme}
        if size == "phone":
            options.update(is_mobile=True, has_touch=True)
        viewport = PHONE if size == "phone" else WIDE
        if who:
            return self.site.login(who, viewport=viewport, **options)
        context = self.site.browser.new_context(viewport=viewport, **options)
        self.site.contexts.append(context)
        return context.new_page()

    @pytest.mark.parametrize("scheme", ["light", "dark"])
    @pytest.mark.parametrize("size", ["desktop", "phone"])
    def test_no_serious_violation_on_the_reviewer_pages(self, size: str, scheme: str) -> None:
        decided_tid = start(self.api, "payer")
        decided = pending_of(decided_tid)
        r = self.site.api("teammate").post(
            f"/api/threads/{decided_tid}/suspensions/{decided.id}/resume",
            {"approved": False, "reason": "paid twice"},
        )
        assert r.status_code == 202, r.content
        wait_for(lambda: Thread.objects.get(pk=decided_tid).status == "completed")
        tid = start(self.api, "payer")
        s = pending_of(tid)
        pending_of(start(self.api, "helpdesk"))
        # A standing grant, so the Grants page shows one with its Revoke button.
        Grant.objects.create(
            agent_name="payer",
            tool_name="transfer_funds",
            conditions=[{"arg": "amount", "op": "<", "value": 500}],
            max_uses=10,
            created_by_name="bob",
            expires_at=timezone.now() + timedelta(hours=1),
        )

        page = self.context(size, scheme, "admin")
        pages = {
            "inbox": "/",
            "thread": f"/threads/{tid}/",
            "decided-thread": f"/threads/{decided_tid}/",
            "audit": "/audit/",
            "new-run": "/runs/new/",
            "grants": "/grants/",
        }
        found = {}
        for name, path in pages.items():
            page.goto(self.site.url(path))
            if name == "inbox":
                expect(card(page, s)).to_be_visible()
            # On a phone the filters fold behind one button: opened, so they are checked too.
            toggle = {"inbox": "Sort and filter", "audit": "Filters"}.get(name)
            if toggle and size == "phone":
                page.get_by_role("button", name=toggle).click()
                expect(page.locator("#filters")).to_be_visible()
            expect(page.locator("link[rel=icon]")).to_have_attribute("href", "/static/favicon.svg")
            assert page.title().endswith("· Approval gateway"), path
            found[name] = violations(page, self.site.server.url)
            self.site.shoot(page, f"a11y-{name}-{size}-{scheme}")
        login = self.context(size, scheme, None)
        login.goto(self.site.url("/login/"))
        expect(login).to_have_title("Log in · Approval gateway")
        found["login"] = violations(login, self.site.server.url)
        self.site.shoot(login, f"a11y-login-{size}-{scheme}")
        failing = {name: v for name, v in found.items() if v}
        assert not failing, json.dumps(failing, indent=1)

    def test_the_favicon_is_served_and_focus_is_visible(self) -> None:
        page = self.context("desktop", "light", "reviewer")
        response = page.request.get(self.site.url("/static/favicon.svg"))
        assert response.status == 200
        assert response.headers["content-type"].startswith("image/svg+xml")
        # Pages that name no icon (the admin's) get it at the address browsers try.
        response = page.request.get(self.site.url("/favicon.ico"), max_redirects=0)
        assert response.status == 301 and response.headers["location"] == "/static/favicon.svg"
        # Tab from the heading to the controls after it: each carries a visible outline.
        page.locator("h1").click()
        for _ in range(3):
            page.keyboard.press("Tab")
            outline = page.evaluate(
                "() => { const e = document.activeElement, s = getComputedStyle(e);"
                " return [e.tagName, s.outlineStyle, parseFloat(s.outlineWidth)]; }"
            )
            assert outline[0] != "BODY" and outline[1] == "solid" and outline[2] >= 2, outline
