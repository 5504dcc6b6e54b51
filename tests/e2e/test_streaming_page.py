"""The thread page live: a model's answer grows while it streams, and agents called as tools
each have a line that follows them (running, waiting for approval, done)."""

import re
from typing import Any

import pytest
from playwright.sync_api import expect

from agents.models import Suspension
from tests.conftest import wait_for
from tests.e2e.conftest import PHONE, Site
from tests.e2e.test_inbox import card, start

pytestmark = [pytest.mark.e2e, pytest.mark.worker]

# Long enough to take the scripted provider a few seconds, four words a chunk.
STORY = " ".join(f"Paragraph {n}: the quarterly numbers look steady." for n in range(1, 31))

AGENTS = f"""
agents:
  - name: narrator
    model: scripted
    stream: true
    tools: [displayConfirmation]
    script:
      - tool_calls:
          - {{name: displayConfirmation, input: {{action: Tell the story}}}}
      - text: "{STORY}"
  - name: lead
    model: scripted
    stream: true
    tools: [displayConfirmation]
    agents_as_tools: [research, asker]
    script:
      - tool_calls:
          - {{name: displayConfirmation, input: {{action: Start the batch}}}}
      - text: Two helpers at once.
        tool_calls:
          - {{name: agent__research, input: {{text: overnight sales}}}}
          - {{name: agent__asker, input: {{text: the weekly report}}}}
      - text: Both helpers are back.
  - name: research
    description: Looks things up, slowly.
    model: scripted
    stream: true
    tools: [pause]
    script:
      - text: Looking into the overnight sales now.
        tool_calls:
          - {{name: pause, input: {{seconds: 4}}}}
      - text: Sales were up three percent.
  - name: asker
    description: Asks a reviewer first.
    model: scripted
    tools: [displayConfirmation]
    script:
      - tool_calls:
          - {{name: displayConfirmation, input: {{action: Publish the weekly report}}}}
      - text: Published.
"""

SECONDS = re.compile(r"^\d+(\.\d)? s$")

# Records every LIVE_TEXT message the page gets, with whether the stored message was there yet.
RECORD = """() => {
  window.__texts = [];
  window.GatewayLive.onText(function (m) {
    window.__texts.push({
      seq: m.seq, length: (m.text || "").length, done: !!m.done, frame: m.frame,
      stored: document.querySelectorAll("#transcript .tone-agent").length,
    });
  });
}"""


def pending(thread_id: str, tool_input: str) -> Suspension:
    return wait_for(
        lambda: Suspension.objects.filter(
            thread_id=thread_id, status="pending", tool_input__action=tool_input
        ).first(),
        timeout=30,
        what=f"the suspension for {tool_input!r}",
    )


def line(page: Any, name: str) -> Any:
    return page.locator("#instances li.instance").filter(has_text=name)


class StreamingPageTestCase:
    @pytest.fixture(autouse=True)
    def setup(self, site: Site, load_agents: Any) -> None:
        load_agents(AGENTS)
        self.site = site

    def test_the_answer_grows_on_the_page_before_it_is_stored(self) -> None:
        page = self.site.login("reviewer")
        tid = start(self.site.api("reviewer"), "narrator")
        first = pending(tid, "Tell the story")
        page.goto(self.site.url(f"/threads/{tid}/"))
        expect(page.locator("#connection")).to_have_attribute("data-state", "live")
        page.evaluate(RECORD)

        card(page, first).get_by_role("button", name="Approve", exact=True).click()
        bubble = page.locator("#live-text li.streaming")
        # Written a few words at a time: the bubble shows the start before the end exists.
        expect(bubble.locator(".text")).to_contain_text("Paragraph 2:", timeout=15000)
        assert "Paragraph 30:" not in bubble.locator(".text").inner_text()
        expect(bubble.locator(".writing")).to_be_visible()
        expect(page.locator("#transcript .tone-agent")).to_have_count(0)
        self.site.shoot(page, "thread-streaming-desktop")

        # The stored message replaces it, once.
        stored = page.locator("#transcript .tone-agent")
        expect(stored).to_have_count(1, timeout=30000)
        expect(stored.locator(".text")).to_have_text(STORY)
        expect(page.locator("#live-text li:not([hidden])")).to_have_count(0)
        expect(page.locator("#thread-status")).to_have_text("completed", timeout=15000)

        texts = page.evaluate("window.__texts")
        growing = [t for t in texts if not t["done"] and t["length"] and not t["stored"]]
        assert len(growing) >= 3, texts
        lengths = [t["length"] for t in growing]
        assert lengths == sorted(lengths) and lengths[0] < len(STORY), texts
        seqs = [t["seq"] for t in texts if t["frame"] == "narrator" and not t["done"]]
        assert seqs == sorted(seqs), texts

    def test_the_batch_panel_follows_each_instance(self) -> None:
        page = self.site.login("reviewer")
        phone = self.site.login("teammate", viewport=PHONE)
        tid = start(self.site.api("reviewer"), "lead")
        first = pending(tid, "Start the batch")
        url = self.site.url(f"/threads/{tid}/")
        for p in (page, phone):
            p.goto(url)
            expect(p.locator("#connection")).to_have_attribute("data-state", "live")
        expect(page.locator("#batch")).to_be_hidden()

        card(page, first).get_by_role("button", name="Approve", exact=True).click()
        research, asker = line(page, "research[1]"), line(page, "asker[2]")
        expect(research.locator(".state")).to_have_text("running", timeout=15000)
        expect(asker.locator(".state")).to_have_text("waiting for approval", timeout=15000)
        expect(research.locator(".duration")).to_have_text(SECONDS, timeout=5000)
        # The duration ticks while the instance runs.
        before = research.locator(".duration").inner_text()
        expect(research.locator(".duration")).not_to_have_text(before, timeout=5000)
        expect(research.locator(".activity")).to_contain_text("calling pause", timeout=5000)

        second = pending(tid, "Publish the weekly report")
        # The instance's own card stays in the transcript, where a reviewer answers it.
        expect(card(page, second)).to_be_visible()
        expect(card(page, second).locator(".agent")).to_have_text("asker[2]")
        for p, name in ((page, "desktop"), (phone, "phone")):
            expect(line(p, "asker[2]").locator(".state")).to_have_text("waiting for approval")
            self.site.shoot(p, f"thread-batch-{name}")

        card(page, second).get_by_role("button", name="Approve", exact=True).click()
        expect(asker.locator(".state")).to_have_text("done", timeout=15000)
        expect(asker.locator(".tools")).to_have_text("used displayConfirmation")
        expect(research.locator(".state")).to_have_text("done", timeout=15000)
        expect(research.locator(".tools")).to_have_text("used pause")
        expect(research.locator(".duration")).to_have_text(SECONDS)
        expect(page.locator("#thread-status")).to_have_text("completed", timeout=15000)

        # Each instance's chat is folded under the line that started it, and opens on demand.
        lane = page.locator("#transcript details.lane").filter(has_text="research[1]")
        expect(lane).to_have_count(1)
        expect(lane).not_to_have_attribute("open", "")
        expect(lane.locator(".lane-entries")).to_contain_text("Sales were up three percent.")
        expect(lane.locator(".lane-entries")).to_be_hidden()
        lane.locator("summary").click()
        expect(lane.locator(".lane-entries")).to_contain_text("Sales were up three percent.")
        main_text = page.locator("#transcript > li.tone-agent")
        expect(main_text).to_contain_text(["Two helpers at once.", "Both helpers are back."])

        # Tokens: the thread's total and each agent's.
        expect(page.locator("#usage")).to_be_visible(timeout=5000)
        expect(page.locator("#usage .usage-agents li")).to_have_count(3, timeout=5000)
        for p, name in ((page, "desktop"), (phone, "phone")):
            expect(line(p, "research[1]").locator(".state")).to_have_text("done")
            self.site.shoot(p, f"thread-batch-done-{name}")

        # What the page built live is what it builds from the server's page after a reload.
        def shape(p: Any) -> Any:
            return p.locator("#transcript li").evaluate_all(
                "els => els.map(e => [e.dataset.event, e.parentElement.closest('li') "
                "&& e.parentElement.closest('li').dataset.event])"
            )

        def panel(p: Any) -> Any:
            return p.locator("#instances li").evaluate_all(
                "els => els.map(e => [e.querySelector('.name').textContent, e.dataset.status, "
                "e.querySelector('.tools').textContent])"
            )

        built, lines = shape(page), panel(page)
        page.reload()
        assert shape(page) == built
        assert panel(page) == lines
