"""The inbox in Chromium at desktop and phone sizes: the most urgent card first, also when it
arrives live; the order switch remembered; decided cards leave with a line saying who decided;
counts per agent and tool follow; sort and filter fold behind one button on a phone."""

import re
from typing import Any

import pytest
from playwright.sync_api import expect

from agents.models import Suspension
from tests.conftest import wait_for
from tests.e2e.conftest import PHONE, Site
from tests.e2e.test_inbox import card, pending_of, start

pytestmark = [pytest.mark.e2e, pytest.mark.worker]

WIDE = {"width": 1366, "height": 900}
SIZES = {"desktop": WIDE, "phone": PHONE}

AGENTS = """
agents:
  - name: relaxed
    model: scripted
    tools: [transfer_funds]
    tool_overrides:
      transfer_funds: {timeout: 7200}
    script:
      - text: Paying the yearly licence.
        tool_calls:
          - {name: transfer_funds, input: {from_account: ACC-1, to_account: ACC-7, amount: 90}}
      - text: Paid.
  - name: twice
    model: scripted
    tools: [transfer_funds]
    script:
      - text: Paying the yearly licence.
        tool_calls:
          - {name: transfer_funds, input: {from_account: ACC-1, to_account: ACC-7, amount: 90}}
      - text: And the support plan.
        tool_calls:
          - {name: transfer_funds, input: {from_account: ACC-1, to_account: ACC-8, amount: 40}}
      - text: Both paid.
  - name: urgent
    model: scripted
    tools: [delete_records]
    tool_overrides:
      delete_records: {execution_mode: blocking, timeout: 600}
    script:
      - text: The table is full; old rows must go now.
        tool_calls:
          - {name: delete_records, input: {table: sessions, count: 5000}}
      - text: Deleted.
"""


def order_of(page: Any) -> list[str]:
    return page.locator("#cards > .card").evaluate_all("cards => cards.map(c => c.dataset.id)")


class InboxOrderTestCase:
    @pytest.fixture(autouse=True)
    def setup(self, site: Site, load_agents: Any) -> None:
        load_agents(AGENTS)
        self.site = site
        self.api = site.api("reviewer")

    def open(self, size: str, who: str = "reviewer") -> Any:
        if size == "phone":
            return self.site.login(who, viewport=PHONE, is_mobile=True, has_touch=True)
        return self.site.login(who, viewport=WIDE)

    def choose_order(self, page: Any, size: str, label: str) -> None:
        toggle = page.get_by_role("button", name="Sort and filter")
        if size == "phone":
            # Folded on a phone: one button opens the form.
            expect(page.locator("#filters")).to_be_hidden()
            toggle.click()
            expect(toggle).to_have_attribute("aria-expanded", "true")
        else:
            expect(toggle).to_be_hidden()
        expect(page.locator("#filters")).to_be_visible()
        page.select_option("select[name=order]", label=label)
        page.get_by_role("button", name="Apply").click()

    @pytest.mark.parametrize("size", SIZES)
    def test_the_earliest_deadline_is_first_and_the_order_is_remembered(self, size: str) -> None:
        relaxed = pending_of(start(self.api, "relaxed"))
        page = self.open(size)
        expect(card(page, relaxed)).to_be_visible()
        expect(page.locator("#connection")).to_have_attribute("data-state", "live")
        # Raised later but due sooner: it arrives live and goes to the top.
        urgent = pending_of(start(self.api, "urgent"))
        expect(card(page, urgent)).to_be_visible()
        assert order_of(page) == [str(urgent.id), str(relaxed.id)]
        # The counts per agent and tool follow what arrives.
        expect(page.locator("select[name=agent] option[value=urgent]")).to_have_text("urgent (1)")
        expect(page.locator("select[name=tool] option[value=delete_records]")).to_have_text(
            "delete_records (1)"
        )
        head = page.locator(".page-head").bounding_box()
        top = page.locator("main").bounding_box()["y"]
        self.site.shoot(page, f"inbox-urgent-{size}")
        if size == "phone":
            # The title bar, the connection line and the inbox's head leave most of the first
            # screen to the cards.
            assert head["y"] + head["height"] <= 0.25 * PHONE["height"], (top, head)
        page.reload()
        assert order_of(page) == [str(urgent.id), str(relaxed.id)]

        self.choose_order(page, size, "Oldest first")
        expect(page.locator("#cards > .card").first).to_have_id(f"s-{relaxed.id}")
        assert order_of(page) == [str(relaxed.id), str(urgent.id)]
        page.goto(self.site.url("/"))
        expect(page.locator("select[name=order]")).to_have_value("oldest")
        assert order_of(page) == [str(relaxed.id), str(urgent.id)]

    @pytest.mark.parametrize("size", SIZES)
    def test_a_decided_card_leaves_the_list_with_who_decided(self, size: str) -> None:
        relaxed = pending_of(start(self.api, "relaxed"))
        urgent = pending_of(start(self.api, "urgent"))
        page = self.open(size)
        expect(page.locator("#connection")).to_have_attribute("data-state", "live")
        expect(page).to_have_title("(2) Inbox · Approval gateway")
        # Someone else decides: the card leaves, a line in its place says who.
        r = self.site.api("teammate").post(
            f"/api/threads/{urgent.thread_id}/suspensions/{urgent.id}/resume",
            {"approved": False, "reason": "keep them"},
        )
        assert r.status_code == 202, r.content
        gone = page.locator(f"#gone-{urgent.id}")
        expect(gone).to_be_visible()
        expect(gone.locator(".what")).to_have_text("Delete 5000 records from sessions · urgent")
        expect(gone.locator(".outcome")).to_have_text("rejected by bob: keep them")
        expect(gone.get_by_role("button")).to_have_count(0)  # final: nothing to undo
        expect(page.locator(f"#s-{urgent.id}")).to_have_count(0)
        expect(page).to_have_title("(1) Inbox · Approval gateway")
        expect(page.locator("select[name=agent] option[value=urgent]")).to_have_text("urgent (0)")
        self.site.shoot(page, f"inbox-decided-{size}")

        # One's own decision too; the focus stays on the line, not lost to the page.
        card(page, relaxed).get_by_role("button", name="Approve", exact=True).click()
        mine = page.locator(f"#gone-{relaxed.id}")
        expect(mine.locator(".outcome")).to_have_text("approved by alice")
        expect(mine).to_be_focused()
        expect(page.locator("#cards > .card")).to_have_count(0)
        expect(page.locator("#empty")).to_be_visible()
        expect(page).to_have_title("(0) Inbox · Approval gateway")
        wait_for(lambda: Suspension.objects.get(pk=relaxed.pk).status == "approved")
        mine.get_by_role("link", name="Open thread").click()
        expect(page.locator("#thread-status")).not_to_have_text("suspended")

    @pytest.mark.parametrize("size", SIZES)
    def test_the_thread_page_says_each_thing_once_and_keeps_cancel_away(self, size: str) -> None:
        tid = start(self.api, "twice")
        s = pending_of(tid)
        page = self.open(size)
        page.goto(self.site.url(f"/threads/{tid}/"))
        expect(card(page, s)).to_be_visible()
        expect(page.locator("#connection")).to_have_attribute("data-state", "live")
        # The agent's message is said once (the card's reasoning is the line above it), and
        # the call once (by its card, not also by a "calls transfer_funds" line).
        said = page.get_by_text("Paying the yearly licence.", exact=True)
        expect(said.filter(visible=True)).to_have_count(1)
        expect(page.locator("#transcript")).not_to_contain_text("calls transfer_funds")
        expect(card(page, s).get_by_text("ACC-7", exact=True).filter(visible=True)).to_have_count(1)
        # Cancelling the whole run sits in the page's head, not under the card's Approve.
        cancel = page.get_by_role("button", name="Cancel run")
        approve = card(page, s).get_by_role("button", name="Approve", exact=True)
        assert cancel.bounding_box()["y"] + 44 <= card(page, s).bounding_box()["y"]
        assert approve.bounding_box()["y"] - cancel.bounding_box()["y"] > 150
        self.site.shoot(page, f"thread-once-{size}")

        # The second call comes live (TOOL_CALLED, then AGENT_SUSPENDED): the same holds.
        approve.click()
        second = wait_for(
            lambda: (
                Suspension.objects.filter(thread_id=tid, status="pending").exclude(pk=s.pk).first()
            ),
            what="the second call",
        )
        expect(card(page, second)).to_be_visible()
        plan = page.get_by_text("And the support plan.", exact=True)
        expect(plan.filter(visible=True)).to_have_count(1)
        expect(page.locator("#transcript")).not_to_contain_text("calls transfer_funds")
        expect(said.filter(visible=True)).to_have_count(1)
        self.site.shoot(page, f"thread-once-live-{size}")
        card(page, second).get_by_role("button", name="Approve", exact=True).click()
        expect(page.locator("#thread-status")).to_have_text("completed")
        expect(cancel).to_be_hidden()
        # Decided cards, live and as the server draws them, show no raw ISO timestamp.
        for _ in range(2):
            for decided in (s, second):
                expect(card(page, decided)).not_to_contain_text(re.compile(r"\d{4}-\d\d-\d\dT"))
                expect(card(page, decided).locator(".outcome")).to_have_text("approved by alice")
            page.reload()
