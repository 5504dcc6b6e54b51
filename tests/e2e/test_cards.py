"""Cards that explain and decisions beyond approve/reject, in Chromium at desktop and phone sizes:
the summary and the deadline's action and time; an edit through the schema form, its diff, and
the edited arguments on the thread page and in the audit; respond and ignore, audited."""

from datetime import datetime
from typing import Any
from zoneinfo import ZoneInfo

import pytest
from playwright.sync_api import expect

from agents.models import Event, Suspension, Thread
from demo.models import DemoAction
from tests.conftest import wait_for
from tests.e2e.conftest import PHONE, Site
from tests.e2e.test_inbox import card, gone, pending_of, start

pytestmark = [pytest.mark.e2e, pytest.mark.worker]

DESKTOP = {"width": 1366, "height": 900}
ZONE = "America/New_York"  # the reviewer's browser, not the server's (UTC)

AGENTS = """
agents:
  - name: payer
    description: Pays invoices.
    model: scripted
    tools: [transfer_funds]
    policy:
      tools:
        transfer_funds: {allow_respond: true}
    script:
      - text: Invoice 118 is due and the account checks out; I will pay it.
        tool_calls:
          - name: transfer_funds
            input: {from_account: ACC-1, to_account: ACC-2, amount: 200, currency: EUR}
      - text: Paid.
        if_error:
          text: I did not pay.
"""


def viewports() -> Any:
    return pytest.mark.parametrize(
        "size",
        [
            pytest.param({"viewport": DESKTOP}, id="desktop"),
            pytest.param({"viewport": PHONE, "is_mobile": True, "has_touch": True}, id="phone"),
        ],
    )


def local_time(at: datetime) -> str:
    """The deadline as the page writes it in the reviewer's zone (en-GB: 24-hour)."""
    return at.astimezone(ZoneInfo(ZONE)).strftime("%H:%M")


class CardsTestCase:
    @pytest.fixture(autouse=True)
    def setup(self, site: Site, load_agents: Any) -> None:
        load_agents(AGENTS)
        self.site = site
        self.api = site.api("reviewer")

    def login(self, size: dict[str, Any], who: str = "reviewer") -> Any:
        return self.site.login(who, locale="en-GB", timezone_id=ZONE, **size)

    @viewports()
    def test_a_card_says_what_the_call_does_and_what_the_deadline_will_do(
        self, size: dict[str, Any], request: Any
    ) -> None:
        page = self.login(size)
        tid = start(self.api, "payer")
        s = pending_of(tid)
        box = card(page, s)
        expect(box).to_be_visible()
        expect(box.locator(".summary")).to_have_text("Transfer 200 EUR from ACC-1 to ACC-2")
        expect(box.locator(".description")).to_have_text("Transfer money between two accounts.")
        expect(box.locator(".reasoning")).to_contain_text(
            "Invoice 118 is due and the account checks out; I will pay it."
        )
        expect(box.locator(".fields tr")).to_have_count(4)
        expect(box.locator(".fields tr[data-field=amount] td")).to_have_text("200")
        # Raw JSON only on demand.
        expect(box.locator(".args")).to_be_hidden()
        box.locator(".raw-json summary").click()
        expect(box.locator(".args")).to_be_visible()
        expect(box.locator(".approve-does")).to_have_text(
            "Approve: The agent runs transfer_funds with these arguments."
        )
        expect(box.locator(".deadline-action")).to_have_text("Rejects automatically")
        expect(box.locator(".deadline-time")).to_have_text(local_time(s.expires_at))
        expect(box.locator(".countdown")).to_contain_text("min")
        expect(box.locator(".countdown")).to_contain_text("left")
        # Words a reviewer understands: no group id, no "main".
        expect(box).not_to_contain_text("group")
        expect(box.locator(".card-head")).not_to_contain_text("main")
        self.site.shoot(page, f"card-explained-{request.node.callspec.id}")

        # The thread's recent history, on demand.
        box.get_by_role("button", name="Recent history").click()
        history = box.locator(".history-list")
        expect(history).to_contain_text("Invoice 118 is due")
        expect(history).to_contain_text("calls transfer_funds")

    @viewports()
    def test_edit_through_the_form_review_the_diff_and_approve_the_edit(
        self, size: dict[str, Any], request: Any
    ) -> None:
        name = request.node.callspec.id
        page = self.login(size)
        tid = start(self.api, "payer")
        s = pending_of(tid)
        box = card(page, s)
        approve = box.get_by_role("button", name="Approve", exact=True)
        box.get_by_role("button", name="Edit…").click()
        form = box.locator(".schema-form")
        # Typed fields from the schema: a number, an enum as a select, required ones marked.
        expect(form.locator("input[name=field-amount]")).to_have_attribute("type", "number")
        expect(form.locator("select[name=field-currency] option")).to_have_text(
            ["(not set)", "EUR", "USD", "GBP"]
        )
        expect(form.locator("[data-field=amount] .required")).to_have_count(1)
        expect(form.locator("[data-field=currency] .required")).to_have_count(0)

        form.locator("input[name=field-amount]").fill("-5")
        expect(approve).to_be_disabled()  # an edit is pending: no plain Approve
        expect(box.locator(".pending-edit")).to_be_visible()
        box.get_by_role("button", name="Review changes").click()
        expect(form.locator("[data-field=amount] .field-error")).to_have_text(
            "must be greater than 0"
        )
        expect(box.get_by_role("button", name="Approve edited")).to_be_hidden()

        form.locator("input[name=field-amount]").fill("150")
        form.locator("select[name=field-currency]").select_option("USD")
        box.get_by_role("button", name="Review changes").click()
        diff = box.locator(".edit-diff")
        expect(diff).to_be_visible()
        expect(diff.locator(".diff-summary")).to_have_text(
            "Transfer 200 EUR from ACC-1 to ACC-2  →  Transfer 150 USD from ACC-1 to ACC-2"
        )
        expect(diff.locator("tr.changed th")).to_have_text(["amount", "currency"])
        expect(diff.locator("tr.changed .before")).to_have_text(["200", "EUR"])
        expect(diff.locator("tr.changed .after")).to_have_text(["150", "USD"])
        expect(approve).to_be_disabled()
        self.site.shoot(page, f"card-edit-diff-{name}")

        box.get_by_role("button", name="Approve edited").click()
        # The decided card leaves the inbox; its line says what happened.
        expect(gone(page, s).locator(".outcome")).to_have_text(
            "approved by alice (arguments edited)"
        )
        wait_for(lambda: Thread.objects.get(pk=tid).status == "completed")
        edited = {"from_account": "ACC-1", "to_account": "ACC-2", "amount": 150, "currency": "USD"}
        s.refresh_from_db()
        assert s.modified_args == edited
        assert DemoAction.objects.get(thread_id=tid).arguments == edited

        # The thread page shows what ran: the edit beside what the agent asked.
        page.goto(self.site.url(f"/threads/{tid}/"))
        ran = card(page, s).locator(".ran-with")
        expect(ran).to_be_visible()
        expect(ran.locator("tr.changed .after")).to_have_text(["150", "USD"])
        expect(page.locator("#transcript")).to_contain_text(
            "Transferred 150 USD from ACC-1 to ACC-2."
        )
        self.site.shoot(page, f"thread-edited-{name}")

        # And the audit trail.
        admin = self.login(size, "admin")
        admin.goto(self.site.url("/audit/"))
        item = admin.locator(f"#a-{s.id}")
        expect(item.locator(".diff")).to_contain_text("150")
        expect(item.locator(".diff")).to_contain_text('"USD"')
        expect(item.locator(".timeline")).to_contain_text("approved (arguments edited)")
        self.site.shoot(admin, f"audit-edited-{name}")

    @viewports()
    def test_respond_answers_the_agent_and_is_audited(
        self, size: dict[str, Any], request: Any
    ) -> None:
        page = self.login(size)
        tid = start(self.api, "payer")
        s = pending_of(tid)
        box = card(page, s)
        box.get_by_role("button", name="Respond…").click()
        box.locator("textarea[name=respond]").fill("Pay it next week, after the credit note.")
        self.site.shoot(page, f"card-respond-{request.node.callspec.id}")
        box.get_by_role("button", name="Send response").click()
        expect(gone(page, s).locator(".outcome")).to_have_text(
            "answered instead of deciding by alice: Pay it next week, after the credit note."
        )
        wait_for(lambda: Thread.objects.get(pk=tid).status == "completed")
        s.refresh_from_db()
        assert s.status == Suspension.Status.RESPONDED
        result = Event.objects.get(thread_id=tid, type="TOOL_RESULT")
        assert result.payload["content"].startswith("Reviewer response from alice")
        assert not DemoAction.objects.filter(thread_id=tid).exists()  # the tool did not run
        decided = Event.objects.get(suspension=s, type="SUSPENSION_DECIDED")
        assert decided.actor_name == "alice" and decided.payload["status"] == "responded"

    @viewports()
    def test_ignore_dismisses_without_deciding_and_is_audited(
        self, size: dict[str, Any], request: Any
    ) -> None:
        page = self.login(size)
        tid = start(self.api, "payer")
        s = pending_of(tid)
        box = card(page, s)
        expect(box).to_be_visible()
        box.get_by_role("button", name="Ignore").click()
        expect(box).to_have_count(0)  # off the inbox
        expect(page.locator(f"#gone-{s.id}")).to_contain_text("dismissed by alice")
        wait_for(lambda: Event.objects.filter(suspension=s, type="SUSPENSION_IGNORED").exists())
        s.refresh_from_db()
        assert s.status == Suspension.Status.PENDING and s.ignored_by_name == "alice"
        page.reload()
        expect(card(page, s)).to_have_count(0)
        # Still pending on its thread's page, with its deadline, and decidable there.
        page.goto(self.site.url(f"/threads/{tid}/"))
        box = card(page, s)
        expect(box.locator(".ignored-line")).to_have_text(
            "Dismissed from the inbox by alice; still pending until its deadline."
        )
        expect(box.locator(".deadline-action")).to_have_text("Rejects automatically")
        self.site.shoot(page, f"thread-ignored-{request.node.callspec.id}")
        box.get_by_role("button", name="Reject…").click()
        box.get_by_role("button", name="Already paid").click()  # a preset reason
        expect(box.locator("input[name=reason]")).to_have_value("Already paid")
        box.get_by_role("button", name="Reject", exact=True).click()
        expect(box.locator(".outcome")).to_have_text("rejected by alice: Already paid")

    def test_keyboard_shortcuts_work_on_desktop_but_not_while_typing(self) -> None:
        page = self.login({"viewport": DESKTOP})
        first = pending_of(start(self.api, "payer"))
        box = card(page, first)
        expect(box.locator(".shortcuts")).to_be_visible()
        box.get_by_role("button", name="Reject…").click()
        reason = box.locator("input[name=reason]")
        reason.press_sequentially("a r e i")  # typing: no shortcut fires
        expect(reason).to_have_value("a r e i")
        page.wait_for_timeout(300)
        first.refresh_from_db()
        assert first.status == "pending" and first.ignored_at is None
        reason.blur()
        page.keyboard.press("e")
        expect(box.locator(".edit-box")).to_be_visible()
        page.locator("body").click(position={"x": 5, "y": 5})
        page.keyboard.press("a")
        expect(gone(page, first).locator(".outcome")).to_have_text("approved by alice")
