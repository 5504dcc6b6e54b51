"""The live inbox in Chromium: cards arrive without a reload, decisions land, text stays text."""

import json
from typing import Any

import pytest
from playwright.sync_api import expect

from agents.models import Event, Suspension, Thread
from tests.conftest import operator_of, wait_for
from tests.e2e.conftest import Site

pytestmark = [pytest.mark.e2e, pytest.mark.worker]

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
  - name: hasty
    model: scripted
    tools: [transfer_funds]
    tool_overrides:
      transfer_funds: {timeout: 2, on_timeout: reject}
    script:
      - tool_calls:
          - {name: transfer_funds, input: {from_account: ACC-1, to_account: ACC-2, amount: 5}}
      - text: Went on without it.
  - name: helpdesk
    model: scripted
    tools: [ask_user]
    script:
      - text: Two environments match.
        tool_calls:
          - {name: ask_user, input: {question: "Staging or production?"}}
      - text: Restarted.
  - name: mischief
    model: scripted
    tools: [displayConfirmation]
    script:
      - text: "<b>Bold</b> claim <img src=x onerror=alert('prompt')> see javascript:alert('p')"
        tool_calls:
          - name: displayConfirmation
            input:
              action: "<script>alert('action')</script>"
              details: "<img src=x onerror=alert('details')>"
              link: "javascript:alert('link')"
      - text: Done.
"""


def start(api: Any, agent: str) -> str:
    r = operator_of(api).post("/api/threads", {"agent": agent, "message": "go"})
    assert r.status_code == 201, r.content
    return r.json()["id"]


def pending_of(thread_id: str) -> Suspension:
    return wait_for(
        lambda: Suspension.objects.filter(thread_id=thread_id, status="pending").first(),
        what=f"a suspension in {thread_id}",
    )


def card(page: Any, s: Suspension) -> Any:
    return page.locator(f"#s-{s.id}")


def gone(page: Any, s: Suspension) -> Any:
    """The line a decided card leaves in the inbox (static/js/inbox.js)."""
    return page.locator(f"#gone-{s.id}")


class InboxTestCase:
    @pytest.fixture(autouse=True)
    def setup(self, site: Site, load_agents: Any) -> None:
        load_agents(AGENTS)
        self.site = site
        self.api = site.api("reviewer")

    def test_a_new_run_appears_live_and_an_approval_completes_it(self) -> None:
        page = self.site.login("reviewer")
        expect(page.locator("#connection")).to_have_attribute("data-state", "live")
        expect(page).to_have_title("(0) Inbox · Approval gateway")
        tid = start(self.api, "payer")
        s = pending_of(tid)
        # Raised by the worker, pushed to the open page: no reload.
        expect(card(page, s)).to_be_visible(timeout=2000)
        expect(card(page, s).locator(".tool")).to_have_text("transfer_funds")
        expect(card(page, s).locator(".prompt")).to_have_text("Invoice 118 is due; I will pay it.")
        expect(card(page, s).locator(".countdown")).to_contain_text("left")
        expect(page).to_have_title("(1) Inbox · Approval gateway")
        args = json.loads(card(page, s).locator(".args").text_content())  # behind "Raw JSON"
        assert args == {
            "from_account": "ACC-1",
            "to_account": "ACC-2",
            "amount": 200,
            "currency": "EUR",
        }
        self.site.shoot(page, "inbox-desktop")

        card(page, s).get_by_role("button", name="Approve", exact=True).click()
        expect(gone(page, s).locator(".outcome")).to_have_text("approved by alice")
        expect(card(page, s)).to_have_count(0)
        expect(page).to_have_title("(0) Inbox · Approval gateway")
        wait_for(
            lambda: Thread.objects.get(pk=tid).status == "completed", what="the thread to complete"
        )

        page.click(f"#gone-{s.id} .thread-link")
        expect(page.locator("#thread-status")).to_have_text("completed")
        expect(page.locator("#transcript")).to_contain_text(
            "Transferred 200 EUR from ACC-1 to ACC-2."
        )
        expect(page.locator("#transcript")).to_contain_text("approved transfer_funds")
        self.site.shoot(page, "thread-desktop")

    def test_the_thread_page_follows_a_run_live(self) -> None:
        page = self.site.login("reviewer")
        tid = start(self.api, "payer")
        page.goto(self.site.url(f"/threads/{tid}/"))
        s = pending_of(tid)
        expect(card(page, s)).to_be_visible()
        expect(page.locator("#thread-status")).to_have_text("suspended")
        expect(page.locator("#stack li")).to_have_text(["payer"])
        r = self.api.post(
            f"/api/threads/{tid}/suspensions/{s.id}/resume",
            {"approved": False, "reason": "not today"},
        )
        assert r.status_code == 202
        expect(page.locator("#thread-status")).to_have_text("completed")
        expect(card(page, s).locator(".outcome")).to_have_text("rejected by alice: not today")
        expect(page.locator("#transcript")).to_contain_text("Not paid.")
        expect(page.locator("#stack li")).to_have_count(0)
        expect(page.locator("#cancel")).to_be_hidden()

    def test_untrusted_arguments_and_text_render_as_text(self) -> None:
        page = self.site.login("reviewer")
        tid = start(self.api, "mischief")
        s = pending_of(tid)
        expect(card(page, s)).to_be_visible()
        args = json.loads(card(page, s).locator(".args").text_content())  # behind "Raw JSON"
        assert args["action"] == "<script>alert('action')</script>"
        assert args["details"] == "<img src=x onerror=alert('details')>"
        assert args["link"] == "javascript:alert('link')"
        expect(card(page, s).locator(".prompt")).to_have_text(
            "<b>Bold</b> claim <img src=x onerror=alert('prompt')> see javascript:alert('p')"
        )
        # Nothing became markup: no image, no script, no link but the thread link.
        assert card(page, s).locator("img, script, b").count() == 0
        assert card(page, s).locator("a").count() == 1
        # The server-rendered page and the thread page say the same, after a reload.
        for path in ("/", f"/threads/{tid}/"):
            page.goto(self.site.url(path))
            expect(card(page, s)).to_be_visible()
            assert page.locator("main img, main b").count() == 0
            assert page.locator("main script:not(#live-data)").count() == 0
        expect(page.locator("#transcript")).to_contain_text("<script>alert('action')</script>")
        page.wait_for_timeout(300)  # give any injected handler the chance to fire
        assert self.site.dialogs == []

    def test_bad_edits_show_their_errors_and_leave_the_suspension_pending(self) -> None:
        page = self.site.login("reviewer")
        tid = start(self.api, "payer")
        s = pending_of(tid)
        box = card(page, s)
        box.get_by_role("button", name="Edit…").click()
        box.get_by_role("button", name="JSON").click()  # the JSON mode, beside the form
        editor = box.locator("textarea[name=args]")
        approve = box.get_by_role("button", name="Review changes")

        editor.fill('{"from_account": "ACC-1", "to_account": ')
        approve.click()
        expect(box.locator(".edit-box .field-errors")).to_contain_text("This is not valid JSON")

        editor.fill(
            '{"from_account": "ACC-1", "to_account": "", "amount": -5,'
            ' "currency": "XYZ", "memo": 1}'
        )
        approve.click()
        errors = box.locator(".edit-box .field-errors li")
        expect(errors).to_have_text(
            [
                "to_account: must not be empty",
                "amount: must be greater than 0",
                'currency: must be one of "EUR", "USD", "GBP"',
                "memo: is not a field of this tool",
            ]
        )
        editor.fill('{"from_account": "ACC-1", "to_account": "ACC-2"}')
        approve.click()
        expect(errors).to_have_text(["amount: is required"])
        page.wait_for_timeout(300)
        s.refresh_from_db()
        assert s.status == "pending"
        assert not Event.objects.filter(suspension=s, type="SUSPENSION_DECIDED").exists()
        expect(box.locator(".status")).to_have_text("pending")

        # A valid edit goes through, once its diff is shown, and the tool runs with it.
        editor.fill('{"from_account": "ACC-1", "to_account": "ACC-9", "amount": 150}')
        approve.click()
        expect(box.locator(".edit-diff tr.changed th")).to_have_text(
            ["to_account", "amount", "currency"]
        )
        box.get_by_role("button", name="Approve edited").click()
        expect(gone(page, s).locator(".outcome")).to_have_text(
            "approved by alice (arguments edited)"
        )
        wait_for(lambda: Thread.objects.get(pk=tid).status == "completed")
        s.refresh_from_db()
        assert s.modified_args == {"from_account": "ACC-1", "to_account": "ACC-9", "amount": 150}

    def test_the_server_s_field_errors_are_shown_next_to_the_editor(self) -> None:
        page = self.site.login("reviewer")
        tid = start(self.api, "payer")
        s = pending_of(tid)
        box = card(page, s)
        expect(box).to_be_visible()
        # The page checks nothing itself: the server's 400 says what is wrong, beside the field.
        assert page.evaluate("typeof window.GatewaySchema") == "undefined"
        box.get_by_role("button", name="Edit…").click()
        box.get_by_role("button", name="JSON").click()
        box.locator("textarea[name=args]").fill(
            '{"from_account": "ACC-1", "to_account": "ACC-2", "amount": 2000000}'
        )
        box.get_by_role("button", name="Review changes").click()
        expect(box.locator(".edit-box .field-errors li")).to_have_text(
            ["amount: must be at most 1000000"]
        )
        expect(box.locator(".notice")).to_contain_text("do not fit the tool's input schema")
        expect(box.get_by_role("button", name="Approve edited")).to_be_hidden()
        s.refresh_from_db()
        assert s.status == "pending"
        # The plain Approve stays off while the edit is pending, and comes back without it.
        approve = box.get_by_role("button", name="Approve", exact=True)
        expect(approve).to_be_disabled()
        box.get_by_role("button", name="Discard edits").click()
        expect(approve).to_be_enabled()

    def test_a_question_is_answered_in_text(self) -> None:
        page = self.site.login("reviewer")
        tid = start(self.api, "helpdesk")
        s = pending_of(tid)
        box = card(page, s)
        expect(box.locator(".status")).to_have_text("pending")
        assert box.get_by_role("button", name="Approve", exact=True).count() == 0
        box.get_by_role("button", name="Send answer").click()
        # Refused by the server (400), its words shown beside the answer box.
        expect(box.locator(".only-input .field-errors")).to_have_text("response: Write an answer.")
        assert Suspension.objects.get(pk=s.pk).status == "pending"
        box.locator("textarea[name=response]").fill("Staging, please")
        box.get_by_role("button", name="Send answer").click()
        expect(gone(page, s).locator(".outcome")).to_have_text("approved by alice: Staging, please")
        wait_for(lambda: Thread.objects.get(pk=tid).status == "completed")
        s.refresh_from_db()
        assert s.response == "Staging, please"

    def test_cancel_from_the_thread_page_ends_the_run_and_its_card(self) -> None:
        page = self.site.login("reviewer")
        tid = start(self.api, "payer")
        s = pending_of(tid)
        page.goto(self.site.url(f"/threads/{tid}/"))
        expect(card(page, s)).to_be_visible()
        page.get_by_role("button", name="Cancel run").click()
        page.get_by_role("button", name="Really cancel the run?").click()
        expect(page.locator("#thread-status")).to_have_text("cancelled")
        expect(card(page, s).locator(".outcome")).to_have_text(
            "cancelled by alice: the run was cancelled"
        )
        expect(page.locator("#cancel")).to_be_hidden()
        assert Thread.objects.get(pk=tid).status == "cancelled"
        assert Suspension.objects.get(pk=s.pk).status == "cancelled"

    def test_a_deadline_changes_the_card_in_place(self) -> None:
        page = self.site.login("reviewer")
        tid = start(self.api, "hasty")
        s = pending_of(tid)
        box = card(page, s)
        expect(box.locator(".countdown")).to_contain_text("s left")
        expect(gone(page, s).locator(".outcome")).to_have_text(
            "timed out: rejected automatically at the deadline", timeout=10000
        )
        expect(box).to_have_count(0)
        expect(page).to_have_title("(0) Inbox · Approval gateway")
