"""The thread page follows the stack live: a pushed skill joins the breadcrumb, a pop leaves it."""

from typing import Any

import pytest
from playwright.sync_api import expect

from agents.models import Suspension
from tests.conftest import wait_for
from tests.e2e.conftest import Site
from tests.e2e.test_inbox import card, start

pytestmark = [pytest.mark.e2e, pytest.mark.worker]

AGENTS = """
agents:
  - name: boss
    model: scripted
    tools: [displayConfirmation]
    sub_agents: [writer]
    script:
      - tool_calls:
          - {name: displayConfirmation, input: {action: Ask the writer}}
      - tool_calls:
          - {name: use_skill, input: {name: writer, message: Pay the printer.}}
      - tool_calls:
          - {name: displayConfirmation, input: {action: Publish}}
      - text: Published.
  - name: writer
    model: scripted
    tools: [transfer_funds]
    script:
      - text: The printer wants 40 EUR.
        tool_calls:
          - {name: transfer_funds, input: {from_account: ACC-1, to_account: PRINT-7, amount: 40}}
      - tool_calls:
          - {name: complete, input: {result: Printer paid.}}
"""


def next_pending(thread_id: str, done: set[str]) -> Suspension:
    return wait_for(
        lambda: (
            Suspension.objects.filter(thread_id=thread_id, status="pending")
            .exclude(pk__in=done)
            .first()
        ),
        what="the next suspension",
    )


class ThreadLiveTestCase:
    @pytest.fixture(autouse=True)
    def setup(self, site: Site, load_agents: Any) -> None:
        load_agents(AGENTS)
        self.site = site

    def test_the_breadcrumb_follows_pushes_and_pops(self) -> None:
        page = self.site.login("reviewer")
        tid = start(self.site.api("reviewer"), "boss")
        first = next_pending(tid, set())
        page.goto(self.site.url(f"/threads/{tid}/"))
        stack = page.locator("#stack li")
        expect(stack).to_have_text(["boss"])

        card(page, first).get_by_role("button", name="Approve", exact=True).click()
        expect(stack).to_have_text(["boss", "skill:writer"])
        second = next_pending(tid, {str(first.id)})
        # The card names who asks, without the stack's words ("main → skill:writer").
        expect(card(page, second).locator(".agent")).to_have_text("writer")
        expect(card(page, second).locator(".lineage")).to_be_hidden()
        expect(page.locator("#thread-status")).to_have_text("suspended")

        card(page, second).get_by_role("button", name="Approve", exact=True).click()
        third = next_pending(tid, {str(first.id), str(second.id)})
        expect(card(page, third)).to_be_visible()
        expect(stack).to_have_text(["boss"])
        expect(page.locator("#transcript")).to_contain_text("skill:writer returned to boss")

        card(page, third).get_by_role("button", name="Approve", exact=True).click()
        expect(page.locator("#thread-status")).to_have_text("completed")
        expect(stack).to_have_count(0)
        # What the page built live is what the server renders: the state may come before the
        # last lines (asked for after the events that brought it), so wait for as many.
        fresh = page.context.new_page()
        fresh.goto(page.url)
        lines = "els => els.map(e => e.dataset.event)"
        server = fresh.locator("#transcript > li").evaluate_all(lines)
        expect(page.locator("#transcript > li")).to_have_count(len(server))
        assert page.locator("#transcript > li").evaluate_all(lines) == server
