"""The ladder on the inbox card in Chromium: when the next reminder goes, whom it escalates to
and what the deadline does, updated live by the sweep's events; the deadline extended once
from the card, with a reason; names and reasons shown as text."""

import re
from datetime import timedelta
from typing import Any

import pytest
from playwright.sync_api import expect

from agents.models import Event, Suspension
from tests.conftest import wait_for
from tests.e2e.conftest import PHONE, Site
from tests.notify.raised import leads

pytestmark = [pytest.mark.e2e, pytest.mark.worker]

GROUP = "<i>leads</i>"
AGENTS = """
agents:
  - name: watched
    model: scripted
    tools: [transfer_funds]
    tool_overrides:
      transfer_funds:
        timeout: 20
        reminders: [15s, 5s]
        escalate_to: "<i>leads</i>"
        escalate_at: 1
    script:
      - text: Paying the supplier.
        tool_calls:
          - {name: transfer_funds, input: {from_account: A-1, to_account: B-2, amount: 90}}
      - text: Done.
        if_error:
          text: Not paid.
"""


class LadderCardTestCase:
    @pytest.fixture(autouse=True)
    def setup(self, site: Site, load_agents: Any) -> None:
        from django.contrib.auth.models import Group

        leads()
        Group.objects.filter(name="leads").update(name=GROUP)
        load_agents(AGENTS)
        self.site = site
        self.api = site.api("reviewer")

    def test_the_card_shows_the_ladder_live_and_extends_the_deadline_once(self) -> None:
        page = self.site.login("reviewer")
        expect(page.locator("#connection")).to_have_attribute("data-state", "live")
        r = self.api.post("/api/threads", {"agent": "watched", "message": "go"})
        assert r.status_code == 201, r.content
        s = wait_for(
            lambda: Suspension.objects.filter(thread_id=r.json()["id"]).first(),
            what="the request",
        )
        card = page.locator(f"#s-{s.id}")
        expect(card).to_be_visible(timeout=3000)  # built by cards.js from the socket's event
        ladder = card.locator(".ladder")
        expect(ladder.locator(".next-reminder")).to_be_visible()
        first = (s.expires_at - timedelta(seconds=15)).isoformat()
        expect(ladder.locator(".next-reminder time")).to_have_attribute("datetime", first)
        expect(ladder.locator(".escalation")).to_contain_text(f"Escalates to {GROUP} at ")
        expect(ladder.locator(".escalate-to")).to_have_text(GROUP)  # text, not markup
        expect(ladder.locator(".escalate-to i")).to_have_count(0)
        expect(card.locator(".deadline-action")).to_have_text("Rejects automatically")
        self.site.shoot(page, "ladder-card-desktop")

        # The first reminder and the escalation (5 s in), applied by the worker's sweep.
        wait_for(
            lambda: Event.objects.filter(suspension=s, type="SUSPENSION_ESCALATED").exists(),
            timeout=12,
            what="the escalation",
        )
        expect(card).to_have_class(re.compile(r"\bescalated\b"), timeout=3000)
        expect(ladder.locator(".escalation")).to_have_text(
            f"Escalated to {GROUP}", use_inner_text=True
        )
        second = (s.expires_at - timedelta(seconds=5)).isoformat()
        expect(ladder.locator(".next-reminder time")).to_have_attribute("datetime", second)

        card.get_by_role("button", name="Extend deadline…").click()
        card.locator("select[name=extend-seconds]").select_option("300")
        card.locator("input[name=extend-reason]").fill("<b>CFO</b> is on a call")
        card.get_by_role("button", name="Extend once").click()

        expect(card.locator(".extension")).to_have_text(
            "Deadline extended by 5 min by alice: <b>CFO</b> is on a call"
        )
        expect(card.locator(".extend-part")).to_be_hidden()
        moved = Suspension.objects.get(pk=s.pk)
        assert moved.expires_at == s.expires_at + timedelta(seconds=300)
        assert card.get_attribute("data-expires") == moved.expires_at.isoformat()
        again = (moved.expires_at - timedelta(seconds=15)).isoformat()
        expect(ladder.locator(".next-reminder time")).to_have_attribute("datetime", again)
        expect(card.locator(".countdown")).to_contain_text("5 min")
        self.site.shoot(page, "ladder-card-extended-desktop")

        refused = self.api.post(
            f"/api/threads/{s.thread_id}/suspensions/{s.id}/extend",
            {"seconds": 60, "reason": "again"},
        )
        assert refused.status_code == 409

        # The server renders the same card: on a phone, after a reload.
        phone = self.site.login("teammate", viewport=PHONE, is_mobile=True, has_touch=True)
        same = phone.locator(f"#s-{s.id}")
        expect(same.locator(".extension")).to_have_text(
            "Deadline extended by 5 min by alice: <b>CFO</b> is on a call"
        )
        expect(same.locator(".escalation")).to_have_text(
            f"Escalated to {GROUP}", use_inner_text=True
        )
        expect(same.locator(".next-reminder time")).to_have_attribute("datetime", again)
        expect(same.locator(".extend-part")).to_be_hidden()
        self.site.shoot(phone, "ladder-card-phone")
