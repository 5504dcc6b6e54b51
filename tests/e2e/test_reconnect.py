"""A cut socket loses nothing: the client replays from its cursor and applies each event once."""

from typing import Any

import pytest
from playwright.sync_api import expect

from agents import decisions, starting
from agents.models import AgentDefinition, Event
from tests.conftest import operator, wait_for
from tests.e2e.conftest import Site, off_the_loop
from tests.e2e.test_inbox import AGENTS, card, pending_of, start

pytestmark = [pytest.mark.e2e, pytest.mark.worker]


def applied(page: Any) -> list[int]:
    return page.evaluate("() => window.__gateway.applied.slice()")


def assert_each_event_applied_once(page: Any) -> None:
    """Every event after the page's first cursor is applied, in order, exactly once."""
    first = page.evaluate("() => window.__gateway.initialCursor")

    def caught_up() -> bool:
        # The worker may still be writing events: wait until the page has all of them.
        expected = list(
            Event.objects.filter(id__gt=first).order_by("id").values_list("id", flat=True)
        )
        return applied(page) == expected

    wait_for(caught_up, what="the page to apply every event once")
    ids = applied(page)
    assert len(ids) == len(set(ids)) and ids == sorted(ids)


class ReconnectTestCase:
    @pytest.fixture(autouse=True)
    def setup(self, site: Site, daphne_server: Any, load_agents: Any) -> None:
        load_agents(AGENTS)
        self.site = site
        self.server = daphne_server
        self.api = site.api("reviewer")

    def test_a_server_restart_while_a_suspension_is_raised_loses_nothing(self) -> None:
        page = self.site.login("reviewer")
        status = page.locator("#connection")
        expect(status).to_have_attribute("data-state", "live")
        before = start(self.api, "payer")
        expect(card(page, pending_of(before))).to_be_visible()

        self.server.stop()
        expect(status).to_have_attribute("data-state", "reconnecting")
        expect(status).to_contain_text("Reconnecting")
        # Raised, and another decided, while no server could tell the page.
        payer = AgentDefinition.objects.get(name="payer")
        alice = self.site.users["reviewer"]
        tid = off_the_loop(lambda: starting.start_thread(payer, "go", operator())).pk
        s = pending_of(tid)
        earlier = pending_of(before)
        decided = off_the_loop(
            lambda: decisions.decide(earlier, alice, {"approved": False, "reason": "duplicate"})
        )
        assert decided.created
        self.server.start()

        expect(status).to_have_attribute("data-state", "live", timeout=30000)
        expect(card(page, s)).to_be_visible()
        expect(card(page, s).locator(".status")).to_have_text("pending")
        # Decided while the page was away: it leaves, saying who decided.
        expect(page.locator(f"#gone-{earlier.id} .outcome")).to_have_text(
            "rejected by alice: duplicate"
        )
        expect(page.locator(f"#s-{earlier.id}")).to_have_count(0)
        assert page.evaluate("() => window.__gateway.connects") == 2
        expect(page).to_have_title("(1) Inbox · Approval gateway")
        assert_each_event_applied_once(page)

    def test_a_closed_socket_reconnects_from_its_cursor(self) -> None:
        page = self.site.login("reviewer")
        expect(page.locator("#connection")).to_have_attribute("data-state", "live")
        page.evaluate("() => window.__gateway.socket.close()")
        tid = start(self.api, "payer")
        s = pending_of(tid)
        expect(card(page, s)).to_be_visible()
        expect(page.locator("#connection")).to_have_attribute("data-state", "live")
        assert page.evaluate("() => window.__gateway.connects") == 2
        assert page.locator(f"#s-{s.id}").count() == 1
        assert_each_event_applied_once(page)

    def test_the_page_says_plainly_when_it_is_offline(self) -> None:
        page = self.site.login("reviewer")
        status = page.locator("#connection")
        expect(status).to_have_attribute("data-state", "live")
        page.context.set_offline(True)
        expect(status).to_have_attribute("data-state", "offline")
        expect(status).to_have_text("Offline: waiting for the network")
        tid = start(self.api, "payer")
        s = pending_of(tid)
        page.context.set_offline(False)
        expect(status).to_have_attribute("data-state", "live")
        expect(card(page, s)).to_be_visible()
        assert_each_event_applied_once(page)
