"""Select many in the inbox, in Chromium at desktop and phone sizes: cards ticked and decided
with one action through POST /api/decisions, a refusal shown on its own card; and the keyboard:
j and k from card to card, a key acting on the card it is on, ? listing the keys."""

import uuid
from typing import Any

import pytest
from playwright.sync_api import expect

from agents.models import Suspension
from tests.conftest import ARTIFACTS, operator_of, wait_for
from tests.e2e.conftest import PHONE, Site, publish
from tests.e2e.test_accessibility import violations
from tests.e2e.test_inbox import card, gone, pending_of, start

pytestmark = [pytest.mark.e2e, pytest.mark.worker]

DESKTOP = {"width": 1366, "height": 900}
FOUR_EYES = "You started this run; someone else must decide it (four eyes)."

# Four eyes is every tool's default (agents.policy): a run alice starts herself, she may not
# decide.
AGENTS = """
agents:
  - name: payer
    model: scripted
    tools: [transfer_funds]
    script:
      - text: Invoice 118 is due; I will pay it.
        tool_calls:
          - name: transfer_funds
            input: {from_account: ACC-1, to_account: ACC-2, amount: 200, currency: EUR}
      - text: Paid.
        if_error:
          text: Not paid.
  - name: clerk
    model: scripted
    tools: [transfer_funds]
    script:
      - tool_calls:
          - name: transfer_funds
            input: {from_account: ACC-1, to_account: ACC-2, amount: 200, currency: EUR}
      - text: Paid.
"""


def viewports() -> Any:
    return pytest.mark.parametrize(
        "size",
        [
            pytest.param({"viewport": DESKTOP}, id="desktop"),
            pytest.param({"viewport": PHONE, "is_mobile": True, "has_touch": True}, id="phone"),
        ],
    )


def status_of(s: Suspension) -> str:
    s.refresh_from_db()
    return s.status


def shown_order(page: Any) -> list[str]:
    """The ids of the inbox's cards, top to bottom."""
    return page.eval_on_selector_all("#cards > .card[data-id]", "cs => cs.map(c => c.dataset.id)")


class SelectManyTestCase:
    @pytest.fixture(autouse=True)
    def setup(self, site: Site, load_agents: Any) -> None:
        load_agents(AGENTS)
        self.site = site
        self.api = site.api("reviewer")

    def inbox(self, **options: Any) -> Any:
        """The inbox with each request a row of its own: these runs make identical requests,
        which it shows as one row by default (approvals.triage; the group tests below)."""
        page = self.site.login("reviewer", **options)
        page.goto(self.site.url("/?group=none"))
        return page

    def pending(self, n: int) -> list[Suspension]:
        """n runs started by the operator, each waiting on one call alice may decide."""
        return [pending_of(start(self.api, "payer")) for _ in range(n)]

    def own(self) -> Suspension:
        """A run alice starts herself: four eyes refuses her decision on it."""
        r = self.api.post("/api/threads", {"agent": "payer", "message": "go"})
        assert r.status_code == 201, r.content
        return pending_of(r.json()["id"])

    def shoot(self, page: Any, name: str) -> None:
        """The screen as the reviewer sees it (the bar is held at its foot)."""
        ARTIFACTS.mkdir(exist_ok=True)
        page.screenshot(path=str(ARTIFACTS / f"{name}.png"))
        publish(name)

    @viewports()
    def test_three_approved_with_one_action_and_four_eyes_refuses_one(
        self, size: dict[str, Any], request: Any
    ) -> None:
        first, second = self.pending(2)
        mine = self.own()
        page = self.inbox(**size)
        bar = page.locator("#selection")
        for s in (first, second, mine):
            expect(card(page, s)).to_be_visible()
        expect(bar).to_be_hidden()
        # The box's name says which request it selects.
        box = card(page, first).get_by_role("checkbox", name="Select Transfer 200 EUR")
        expect(box).to_have_count(1)
        for s in (first, second, mine):
            card(page, s).locator("input[data-action=select]").check()
        expect(bar).to_be_visible()
        expect(page.locator("#selection-count")).to_have_text("3 selected")
        page.evaluate("window.scrollTo(0, 0)")
        expect(bar).to_be_in_viewport()  # held at the foot of the screen
        self.shoot(page, f"select-{request.node.callspec.id}")

        bar.get_by_role("button", name="Approve selected").click()
        expect(page.locator("#selection-said")).to_have_text("2 decided, 1 refused: see the card")
        for s in (first, second):
            expect(gone(page, s).locator(".outcome")).to_have_text("approved by alice")
            assert status_of(s) == Suspension.Status.APPROVED
        notice = card(page, mine).locator(".notice")
        expect(notice).to_be_visible()
        expect(notice).to_have_text(FOUR_EYES)
        assert status_of(mine) == Suspension.Status.PENDING
        # The refused one stays selected, to be sent again or left out.
        expect(card(page, mine).locator("input[data-action=select]")).to_be_checked()
        expect(page.locator("#selection-count")).to_have_text("1 selected")
        bar.get_by_role("button", name="Clear").click()
        expect(bar).to_be_hidden()
        expect(card(page, mine).locator("input[data-action=select]")).not_to_be_checked()

    @viewports()
    def test_reject_selected_with_one_reason(self, size: dict[str, Any]) -> None:
        first, second, left_alone = self.pending(3)
        page = self.inbox(**size)
        for s in (first, second, left_alone):
            expect(card(page, s)).to_be_visible()
        card(page, first).locator("input[data-action=select]").check()
        card(page, second).locator("input[data-action=select]").check()
        bar = page.locator("#selection")
        expect(page.locator("#selection-count")).to_have_text("2 selected")
        bar.get_by_role("button", name="Reject selected…").click()
        reason = bar.get_by_role("textbox", name="Reason, for each of them")
        expect(reason).to_be_focused()
        reason.fill("Paid twice")
        bar.get_by_role("button", name="Reject selected", exact=True).click()
        expect(page.locator("#selection-said")).to_have_text("2 decided")
        for s in (first, second):
            expect(gone(page, s).locator(".outcome")).to_have_text("rejected by alice: Paid twice")
            s.refresh_from_db()
            assert (s.status, s.approved, s.reason) == ("rejected", False, "Paid twice")
            assert s.decided_by == self.site.users["reviewer"]
        assert status_of(left_alone) == Suspension.Status.PENDING
        expect(page.locator("#selection-count")).to_have_text("0 selected")

    @viewports()
    def test_select_all_shown_and_a_card_decided_elsewhere_leaves_the_selection(
        self, size: dict[str, Any]
    ) -> None:
        first, second = self.pending(2)
        page = self.inbox(**size)
        for s in (first, second):
            expect(card(page, s)).to_be_visible()
        if size["viewport"] == PHONE:
            expect(page.get_by_role("button", name="Select all shown")).to_be_in_viewport()
        page.get_by_role("button", name="Select all shown").click()
        expect(page.locator("#selection-count")).to_have_text("2 selected")
        teammate = self.site.api("teammate")
        r = teammate.post(
            f"/api/threads/{first.thread_id}/suspensions/{first.id}/resume", {"approved": True}
        )
        assert r.status_code == 202, r.content
        expect(gone(page, first).locator(".outcome")).to_have_text("approved by bob")
        expect(page.locator("#selection-count")).to_have_text("1 selected")

    def raise_requests(self, n: int, amount: int = 75) -> list[Suspension]:
        """n identical requests from an outside agent (each its own run), raised by the
        operator: one call, the same agent, tool and arguments."""
        client = operator_of(self.api)
        made = []
        for _ in range(n):
            body = {
                "agent": "nightly",
                "run_id": f"night-{uuid.uuid4().hex[:12]}",
                "idempotency_key": "refund",
                "tool": "refund",
                "arguments": {"order": "A-17", "amount": amount},
                "summary": "Refund {amount} EUR on {order}",
            }
            r = client.post("/api/requests", body)
            assert r.status_code == 201, r.content
            made.append(r.json()["id"])
        return list(Suspension.objects.filter(pk__in=made).order_by("created_at", "id"))

    @viewports()
    def test_a_group_of_50_identical_requests_is_one_row_rejected_at_once(
        self, size: dict[str, Any], request: Any
    ) -> None:
        group = self.raise_requests(50)
        [other] = self.raise_requests(1, amount=20)
        page = self.site.login("reviewer", **size)
        page.goto(self.site.url("/?group=same"))
        row = card(page, group[0])
        expect(page.locator("#cards > .card[data-id]")).to_have_count(2)
        expect(row.locator(".same-count")).to_have_text("50")
        expect(row).to_contain_text("50 identical requests wait")
        expect(card(page, other)).to_be_visible()
        expect(page).to_have_title("(51) Inbox · Approval gateway")
        # One more arrives live: the row counts it, no card of its own.
        [late] = self.raise_requests(1)
        late_id = str(late.id)
        expect(row.locator(".same-count")).to_have_text("51")
        expect(page.locator(f"#s-{late_id}")).to_have_count(0)
        expect(page).to_have_title("(52) Inbox · Approval gateway")

        row.locator("input[data-action=select]").check()
        expect(page.locator("#selection-count")).to_have_text("51 selected")
        self.shoot(page, f"group-{request.node.callspec.id}")
        bar = page.locator("#selection")
        bar.get_by_role("button", name="Reject selected…").click()
        bar.get_by_role("textbox", name="Reason, for each of them").fill("Runaway loop")
        bar.get_by_role("button", name="Reject selected", exact=True).click()
        expect(page.locator("#selection-said")).to_have_text("51 decided")
        expect(gone(page, group[0]).locator(".outcome")).to_have_text(
            "rejected by alice: Runaway loop"
        )
        rejected = Suspension.objects.filter(pk__in=[s.pk for s in [*group, late]])
        assert {(s.status, s.reason) for s in rejected} == {("rejected", "Runaway loop")}
        assert rejected.count() == 51
        assert status_of(other) == Suspension.Status.PENDING
        expect(page).to_have_title("(1) Inbox · Approval gateway")
        expect(page.locator("#cards > .card[data-id]")).to_have_count(1)

    def test_a_group_row_selects_all_its_requests_and_keeps_the_refused_one(self) -> None:
        # Three identical calls; alice started the second herself, so four eyes refuses her
        # decision on it: the other two are approved and it stays, selected, saying why.
        first = self.pending(1)[0]
        mine = self.own()
        [third] = self.pending(1)
        page = self.site.login("reviewer", viewport=DESKTOP)
        page.goto(self.site.url("/?group=same"))
        row = card(page, first)
        expect(row.locator(".same-count")).to_have_text("3")
        row.locator("input[data-action=select]").check()
        expect(page.locator("#selection-count")).to_have_text("3 selected")
        page.get_by_role("button", name="Approve selected").click()
        expect(page.locator("#selection-said")).to_have_text("2 decided, 1 refused: see the card")
        for s in (first, third):
            wait_for(lambda s=s: status_of(s) == Suspension.Status.APPROVED, what="approval")
        assert status_of(mine) == Suspension.Status.PENDING
        # The row that was first left; the refused request is the row now, still selected.
        expect(card(page, mine).locator(".notice")).to_have_text(f"1 of 3 refused: {FOUR_EYES}")
        expect(card(page, mine).locator("input[data-action=select]")).to_be_checked()
        expect(page.locator("#selection-count")).to_have_text("1 selected")

    @pytest.mark.parametrize(
        "size,scheme",
        [
            pytest.param({"viewport": DESKTOP}, "light", id="desktop-light"),
            pytest.param(
                {"viewport": PHONE, "is_mobile": True, "has_touch": True}, "dark", id="phone-dark"
            ),
        ],
    )
    def test_axe_finds_no_serious_violation_in_the_bar_and_the_list_of_keys(
        self, size: dict[str, Any], scheme: str
    ) -> None:
        first, second = self.pending(2)
        page = self.inbox(color_scheme=scheme, **size)
        for s in (first, second):
            expect(card(page, s)).to_be_visible()
        card(page, first).locator("input[data-action=select]").check()
        page.get_by_role("button", name="Reject selected…").click()
        expect(page.locator("#selection-reject")).to_be_visible()
        assert violations(page, self.site.server.url) == []
        page.locator("#selection-reject input").blur()  # typing in it, ? would be a letter
        page.keyboard.press("?")
        expect(page.locator("#keys")).to_be_visible()
        assert violations(page, self.site.server.url) == []

    def test_the_keyboard_moves_between_cards_and_acts_on_the_one_it_is_on(self) -> None:
        self.pending(3)
        page = self.inbox(viewport=DESKTOP)
        expect(page.locator("#cards > .card[data-id]")).to_have_count(3)
        expect(page.locator("#connection")).to_have_attribute("data-state", "live")
        ids = shown_order(page)
        focused = "document.activeElement.id"
        page.keyboard.press("j")
        assert page.evaluate(focused) == f"s-{ids[0]}"
        page.keyboard.press("j")
        assert page.evaluate(focused) == f"s-{ids[1]}"
        page.keyboard.press("k")
        assert page.evaluate(focused) == f"s-{ids[0]}"
        page.keyboard.press("j")
        second = Suspension.objects.get(pk=ids[1])
        page.keyboard.press("a")
        expect(page.locator(f"#gone-{ids[1]} .outcome")).to_have_text("approved by alice")
        wait_for(lambda: status_of(second) == Suspension.Status.APPROVED, what="the approval")

        # The list of keys, and Escape closes it.
        keys = page.locator("#keys")
        page.keyboard.press("?")
        expect(keys).to_be_visible()
        expect(keys.get_by_role("heading", name="Keyboard shortcuts")).to_be_visible()
        expect(keys).to_contain_text("The next or the previous card")
        self.shoot(page, "keys-desktop")
        page.keyboard.press("a")  # behind the open list: nothing
        page.keyboard.press("Escape")
        expect(keys).to_be_hidden()

        # x selects the card it is on; c claims it.
        page.keyboard.press("j")
        third = page.evaluate(focused)
        assert third == f"s-{ids[2]}"
        page.keyboard.press("x")
        expect(page.locator("#selection-count")).to_have_text("1 selected")
        expect(page.locator(f"#{third} input[data-action=select]")).to_be_checked()
        page.keyboard.press("x")
        expect(page.locator("#selection")).to_be_hidden()
        page.keyboard.press("c")
        expect(page.locator(f"#{third} .claim-line")).to_contain_text("are reviewing")

        # r opens the reason; typing in it decides nothing.
        page.keyboard.press("r")
        reason = page.locator(f"#{third} input[name=reason]")
        expect(reason).to_be_focused()
        reason.press_sequentially("a x j c")
        expect(reason).to_have_value("a x j c")
        page.wait_for_timeout(300)
        assert status_of(Suspension.objects.get(pk=ids[2])) == Suspension.Status.PENDING
        assert status_of(Suspension.objects.get(pk=ids[0])) == Suspension.Status.PENDING
        expect(page.locator("#selection")).to_be_hidden()
