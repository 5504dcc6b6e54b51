"""The inbox's triage: identical requests as one row with a count, and the filters of a long
queue (risk, deadline within, claimed by me or unclaimed) with counts that follow the queue."""

import re
import uuid
from datetime import timedelta
from typing import Any

import pytest
from django.test import Client
from django.utils import timezone

from agents import decisions
from agents.models import Suspension
from agents.runtime.tools import Tool
from approvals import triage
from presence.models import Claim
from tests.approvals.test_inbox_page import run_until_paused

AGENTS = """
agents:
  - name: payer
    model: scripted
    tools: [transfer_funds]
    script:
      - tool_calls:
          - name: transfer_funds
            input: {from_account: ACC-1, to_account: B-2, amount: 200}
      - text: Paid.
  - name: other_payer
    model: scripted
    tools: [transfer_funds]
    script:
      - tool_calls:
          - name: transfer_funds
            input: {from_account: ACC-1, to_account: B-2, amount: 999}
      - text: Paid.
  - name: mailer
    model: scripted
    tools: [send_email]
    tool_overrides:
      send_email: {risk: low}
    script:
      - tool_calls:
          - {name: send_email, input: {to: one@example.com, subject: First}}
      - text: Sent.
"""

ROW = re.compile(r'<article class="card[^"]*" id="s-([0-9a-f-]+)"[^>]*>')


def rows(html: str) -> list[str]:
    return ROW.findall(html)


def attribute(html: str, sid: str, name: str) -> str | None:
    tag = re.search(rf'<article [^>]*id="s-{sid}"[^>]*>', html)
    assert tag, f"no card for {sid}"
    found = re.search(rf'\s{name}="([^"]*)"', tag.group(0))
    return found.group(1) if found else None


def pending_of(agent: str) -> list[Suspension]:
    return list(
        Suspension.objects.filter(agent_name=agent, status="pending").order_by("created_at", "id")
    )


def claim(s: Suspension, user: Any, minutes: int = 5) -> Claim:
    now = timezone.now()
    return Claim.objects.create(
        suspension=s,
        user=user,
        name=user.username,
        socket=uuid.uuid4(),
        process=uuid.uuid4(),
        claimed_at=now,
        expires_at=now + timedelta(minutes=minutes),
        seen_at=now,
    )


class TriageTestCase:
    @pytest.fixture(autouse=True)
    def setup(self, users: dict[str, Any], load_agents: Any) -> None:
        load_agents(AGENTS)
        self.users = users
        self.client = Client()
        self.client.force_login(users["reviewer"])

    def page(self, query: str = "") -> str:
        r = self.client.get(f"/{query}")
        assert r.status_code == 200
        return r.content.decode()

    def test_identical_requests_are_one_row_with_their_count_and_ids(self) -> None:
        for _ in range(5):
            run_until_paused("payer", self.users["reviewer"])
        run_until_paused("other_payer", self.users["reviewer"])
        same = pending_of("payer")
        [different] = pending_of("other_payer")
        html = self.page("?order=oldest")
        # The first of the five stands for them, the other amount is a row of its own.
        assert rows(html) == [str(same[0].id), str(different.id)]
        assert attribute(html, str(same[0].id), "data-same") == "5"
        assert attribute(html, str(same[0].id), "data-members") == " ".join(str(s.id) for s in same)
        assert '<strong class="same-count">5</strong> identical requests wait' in html
        assert attribute(html, str(different.id), "data-members") is None
        assert "<title>(6) Inbox" in html
        # Each alone, when the reader asks for it (and remembered).
        assert rows(self.page("?group=none&order=oldest")) == [
            str(s.id) for s in [*same, different]
        ]
        assert len(rows(self.page())) == 6
        assert len(rows(self.page("?group=same"))) == 2

    def test_the_row_follows_its_requests_as_they_are_decided(self) -> None:
        for _ in range(3):
            run_until_paused("payer", self.users["reviewer"])
        first, second, third = pending_of("payer")
        url = f"/fragments/suspensions/{second.id}/card?in=inbox"
        html = self.client.get(url).content.decode()
        assert attribute(html, str(second.id), "data-same") == "3"
        decisions.decide(first, self.users["teammate"], {"approved": False, "reason": "dup"})
        html = self.client.get(url).content.decode()
        assert attribute(html, str(second.id), "data-same") == "2"
        assert attribute(html, str(second.id), "data-members") == f"{second.id} {third.id}"
        # The row's first left: `next=1` gives the card of the next one that waits.
        html = self.client.get(f"/fragments/suspensions/{first.id}/card?in=inbox&next=1").content
        assert rows(html.decode()) == [str(second.id)]
        for s in (second, third):
            decisions.decide(s, self.users["teammate"], {"approved": False, "reason": "dup"})
        r = self.client.get(f"/fragments/suspensions/{first.id}/card?in=inbox&next=1")
        assert r.status_code == 200 and r.content == b""
        # Without `next`, the line that says what happened to it.
        html = self.client.get(f"/fragments/suspensions/{first.id}/card?in=inbox").content
        assert b'class="gone"' in html

    def test_a_long_queue_is_grouped_over_its_first_part_and_counted_whole(
        self, monkeypatch: Any
    ) -> None:
        monkeypatch.setattr(triage, "TRIAGE_SCAN", 2)
        for _ in range(4):
            run_until_paused("payer", self.users["reviewer"])
        html = self.page("?order=oldest")
        [row] = rows(html)
        assert attribute(html, row, "data-same") == "4"
        # Only the requests read carry their ids; the count is whole.
        assert len((attribute(html, row, "data-members") or "").split()) == 2

    def test_the_risk_a_tool_declares_is_shown_and_filtered(self) -> None:
        run_until_paused("payer", self.users["reviewer"])  # transfer_funds: high (demo tools)
        run_until_paused("mailer", self.users["reviewer"])  # send_email, overridden to low
        [paying] = pending_of("payer")
        [mailing] = pending_of("mailer")
        assert paying.presentation["risk"] == "high" and mailing.presentation["risk"] == "low"
        html = self.page()
        assert attribute(html, str(paying.id), "data-risk") == "high"
        assert "High risk</span>" in html and "Low risk</span>" in html
        assert rows(self.page("?risk=high")) == [str(paying.id)]
        assert rows(self.page("?risk=low")) == [str(mailing.id)]
        assert rows(self.page("?risk=normal")) == []
        # Made before requests kept a risk: normal.
        Suspension.objects.filter(pk=mailing.pk).update(presentation={})
        assert rows(self.page("?risk=normal")) == [str(mailing.id)]
        # A value it does not know filters nothing.
        assert len(rows(self.page("?risk=extreme"))) == 2
        options = self.page()
        assert '<option value="high" data-count="1">High (1)</option>' in options

    def test_a_tool_with_an_unknown_risk_is_refused(self) -> None:
        with pytest.raises(ValueError, match="risk must be one of"):
            Tool(name="t", description="", input_schema={"type": "object"}, risk="severe")

    def test_deadline_within(self) -> None:
        run_until_paused("payer", self.users["reviewer"])
        run_until_paused("mailer", self.users["reviewer"])
        run_until_paused("other_payer", self.users["reviewer"])
        [soon], [later], [never] = (
            pending_of("payer"),
            pending_of("mailer"),
            pending_of("other_payer"),
        )
        now = timezone.now()
        Suspension.objects.filter(pk=soon.pk).update(expires_at=now + timedelta(minutes=10))
        Suspension.objects.filter(pk=later.pk).update(expires_at=now + timedelta(hours=3))
        Suspension.objects.filter(pk=never.pk).update(expires_at=None)
        assert rows(self.page("?within=900")) == [str(soon.id)]
        assert rows(self.page("?within=14400")) == [str(soon.id), str(later.id)]
        html = self.page()
        assert '<option value="900" data-count="1">Within 15 minutes (1)</option>' in html
        assert '<option value="86400" data-count="2">Within 1 day (2)</option>' in html
        # Only the offered spans: anything else filters nothing.
        assert len(rows(self.page("?within=60"))) == 3

    def test_claimed_by_me_by_others_or_unclaimed(self) -> None:
        run_until_paused("payer", self.users["reviewer"])
        run_until_paused("mailer", self.users["reviewer"])
        run_until_paused("other_payer", self.users["reviewer"])
        [mine], [theirs], [free] = (
            pending_of("payer"),
            pending_of("mailer"),
            pending_of("other_payer"),
        )
        claim(mine, self.users["reviewer"])
        claim(theirs, self.users["teammate"])
        assert rows(self.page("?claim=mine")) == [str(mine.id)]
        assert rows(self.page("?claim=others")) == [str(theirs.id)]
        assert rows(self.page("?claim=unclaimed")) == [str(free.id)]
        counts = self.client.get("/fragments/inbox/counts").content.decode()
        assert '<option value="mine" data-count="1">Claimed by me (1)</option>' in counts
        assert '<option value="unclaimed" data-count="1">Unclaimed (1)</option>' in counts
        # A lapsed claim holds no more: the request is unclaimed again.
        Claim.objects.filter(suspension=mine).update(expires_at=timezone.now())
        assert set(rows(self.page("?claim=unclaimed"))) == {str(mine.id), str(free.id)}
        # The teammate's view of the same claims.
        other = Client()
        other.force_login(self.users["teammate"])
        assert rows(other.get("/?claim=mine").content.decode()) == [str(theirs.id)]

    def test_the_counts_follow_the_queue(self) -> None:
        run_until_paused("payer", self.users["reviewer"])
        run_until_paused("payer", self.users["reviewer"])
        counts = self.client.get("/fragments/inbox/counts").content.decode()
        assert 'id="pending-count">2<' in counts
        assert '<option value="high" data-count="2">High (2)</option>' in counts
        first = pending_of("payer")[0]
        decisions.decide(first, self.users["teammate"], {"approved": False, "reason": "no"})
        counts = self.client.get("/fragments/inbox/counts?risk=high").content.decode()
        assert 'id="pending-count">1<' in counts
        assert '<option value="high" data-count="1" selected>High (1)</option>' in counts

    def test_an_outside_agent_declares_the_risk_of_its_request(self, api: Any) -> None:
        client = api("operator")
        body = {
            "agent": "outside",
            "run_id": "r1",
            "idempotency_key": "k1",
            "tool": "wire",
            "arguments": {"amount": 5},
            "risk": "high",
        }
        r = client.post("/api/requests", body)
        assert r.status_code == 201, r.content
        assert r.json()["presentation"]["risk"] == "high"
        body.update(idempotency_key="k2", risk="dire")
        r = client.post("/api/requests", body)
        assert r.status_code == 400 and "risk" in r.json()["fields"]
