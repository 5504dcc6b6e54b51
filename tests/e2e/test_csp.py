"""The pages run under their Content-Security-Policy in Chromium with no violation."""

from typing import Any

import pytest
from playwright.sync_api import expect

from tests.e2e.conftest import Site

pytestmark = [pytest.mark.e2e, pytest.mark.worker]

# Added by the browser's devtools, so the policy does not apply to the listener itself.
RECORD_VIOLATIONS = """
window.__cspViolations = [];
document.addEventListener("securitypolicyviolation", function (e) {
  window.__cspViolations.push(e.violatedDirective + " " + e.blockedURI);
});
"""


class ContentSecurityPolicyTestCase:
    def test_the_pages_load_and_go_live_with_no_violation(self, site: Site) -> None:
        page = site.login("admin")
        console: list[str] = []
        page.on("console", lambda m: console.append(m.text))
        page.add_init_script(RECORD_VIOLATIONS)
        page.goto(site.url("/"))
        # The socket connected: connect-src let it through.
        expect(page.locator("#connection")).to_have_attribute("data-state", "live", timeout=30000)
        seen: list[Any] = list(page.evaluate("window.__cspViolations"))
        for path in ("/runs/new/", "/audit/", "/admin/", "/admin/agents/thread/"):
            page.goto(site.url(path))
            page.wait_for_load_state("load")
            seen += page.evaluate("window.__cspViolations")
        assert seen == []
        assert not [m for m in console if "Content Security Policy" in m], console
        # The recorder does catch what the policy blocks: an inline style attribute.
        page.evaluate("document.body.setAttribute('style', 'color: red')")
        page.wait_for_function("window.__cspViolations.length > 0", timeout=5000)
        assert "style-src" in page.evaluate("window.__cspViolations")[0]
