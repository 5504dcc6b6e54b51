"""The inbox page: pending suspensions rendered on the server, escaped, filtered, with a cursor."""

import json
import re
from datetime import timedelta
from typing import Any

import pytest
from django.test import Client
from django.utils import timezone

from agents import decisions, starting
from agents.engine import Engine
from agents.models import AgentDefinition, Event, Suspension, Thread
from tests.conftest import operator

AGENTS = """
agents:
  - name: payer
    model: scripted
    tools: [transfer_funds]
    script:
      - text: "Paying <b>now</b>."
        tool_calls:
          - name: transfer_funds
            input: {from_account: "<script>alert(1)</script>", to_account: B-2, amount: 200}
      - text: Paid.
  - name: pair
    model: scripted
    tools: [send_email]
    script:
      - tool_calls:
          - {name: send_email, input: {to: one@example.com, subject: First}}
          - {name: send_email, input: {to: two@example.com, subject: Second}}
      - text: Sent.
  - name: asker
    model: scripted
    tools: [ask_user]
    script:
      - tool_calls:
          - {name: ask_user, input: {question: "Staging or production?"}}
      - text: Thanks.
"""


def run_until_paused(agent: str, user: Any) -> Thread:
    """Start a run and drive it in-process until it waits for someone."""
    thread = starting.start_thread(AgentDefinition.objects.get(name=agent), "go", operator())
    Engine().advance(thread.pk)
    return Thread.objects.get(pk=thread.pk)


def live_data(html: str) -> dict[str, Any]:
    match = re.search(r'<script id="live-data" type="application/json">(.*?)</script>', html, re.S)
    assert match, "the page carries no live-data"
    return json.loads(match.group(1))


class InboxPageTestCase:
    @pytest.fixture(autouse=True)
    def setup(self, users: dict[str, Any], load_agents: Any) -> None:
        load_agents(AGENTS)
        self.users = users
        self.client = Client()
        self.client.force_login(users["reviewer"])

    def test_it_sends_anonymous_visitors_to_the_login_page(self) -> None:
        r = Client().get("/")
        assert r.status_code == 302 and r["Location"].startswith("/login/")

    def test_it_refuses_a_user_without_the_view_permission(self) -> None:
        client = Client()
        client.force_login(self.users["outsider"])
        assert client.get("/").status_code == 403

    def test_it_shows_a_pending_card_with_everything_a_reviewer_needs(self) -> None:
        thread = run_until_paused("payer", self.users["reviewer"])
        [s] = Suspension.objects.filter(thread=thread)
        r = self.client.get("/")
        assert r.status_code == 200
        html = r.content.decode()
        assert f'id="s-{s.id}"' in html
        assert f'href="/threads/{thread.id}/"' in html
        assert "transfer_funds" in html and "payer" in html and s.lineage in html
        assert f'data-expires="{s.expires_at.isoformat()}"' in html
        assert str(s.group)[:8] in html
        assert "<title>(1) Inbox" in html
        # The prompt and the arguments are text, never markup (invariant 6).
        assert "Paying &lt;b&gt;now&lt;/b&gt;." in html
        assert "&lt;script&gt;alert(1)&lt;/script&gt;" in html
        assert "<script>alert(1)" not in html
        assert "&quot;amount&quot;: 200" in html  # pretty-printed, escaped JSON

    def test_it_renders_the_cursor_of_the_events_the_state_includes(self) -> None:
        run_until_paused("payer", self.users["reviewer"])
        data = live_data(self.client.get("/").content.decode())
        newest = Event.objects.order_by("-id").first()
        # Events from the last moments are replayed again rather than risked (agents.cursor).
        assert 0 <= data["cursor"] <= newest.id

    def test_it_lists_oldest_first_and_leaves_out_decided_ones(self) -> None:
        first = run_until_paused("payer", self.users["reviewer"])
        second = run_until_paused("asker", self.users["reviewer"])
        decided = run_until_paused("payer", self.users["reviewer"])
        s = Suspension.objects.get(thread=decided)
        decisions.decide(s, self.users["teammate"], {"approved": False, "reason": "no"})
        html = self.client.get("/?order=oldest").content.decode()
        ids = re.findall(r'<article class="card" id="s-([0-9a-f-]+)"', html)
        assert ids == [str(Suspension.objects.get(thread=t).id) for t in (first, second)]
        assert "<title>(2) Inbox" in html

    def card_ids(self, query: str = "") -> list[str]:
        # Each request a row of its own: these runs make identical requests (approvals.triage).
        query += ("&" if "?" in query else "?") + "group=none"
        html = self.client.get(f"/{query}").content.decode()
        return re.findall(r'<article class="card" id="s-([0-9a-f-]+)"', html)

    def test_the_earliest_deadline_comes_first_then_the_oldest(self) -> None:
        threads = [run_until_paused("payer", self.users["reviewer"]) for _ in range(4)]
        old, soon, later, none = (Suspension.objects.get(thread=t) for t in threads)
        now = timezone.now()
        Suspension.objects.filter(pk=old.pk).update(expires_at=now + timedelta(hours=2))
        Suspension.objects.filter(pk=soon.pk).update(expires_at=now + timedelta(minutes=5))
        Suspension.objects.filter(pk=later.pk).update(expires_at=now + timedelta(hours=2))
        Suspension.objects.filter(pk=none.pk).update(expires_at=None)
        # Same deadline: the older first; no deadline: last.
        assert self.card_ids() == [str(s.id) for s in (soon, old, later, none)]
        assert self.card_ids("?order=newest") == [str(s.id) for s in (none, later, soon, old)]

    def test_the_chosen_order_is_remembered(self) -> None:
        threads = [run_until_paused("payer", self.users["reviewer"]) for _ in range(2)]
        first, second = (Suspension.objects.get(thread=t) for t in threads)
        Suspension.objects.filter(pk=second.pk).update(expires_at=timezone.now())
        assert self.card_ids() == [str(second.id), str(first.id)]
        assert self.card_ids("?order=oldest") == [str(first.id), str(second.id)]
        html = self.client.get("/").content.decode()
        assert '<option value="oldest" selected>Oldest first</option>' in html
        assert live_data(html)["order"] == "oldest"
        assert self.card_ids() == [str(first.id), str(second.id)]
        # Another reviewer's session keeps its own.
        other = Client()
        other.force_login(self.users["teammate"])
        html = other.get("/").content.decode()
        assert re.findall(r'<article class="card" id="s-([0-9a-f-]+)"', html)[0] == str(second.id)
        # Nonsense is ignored, not remembered.
        assert self.card_ids("?order=sideways") == [str(first.id), str(second.id)]

    def test_past_the_counted_limit_it_shows_no_counts(self, monkeypatch: Any) -> None:
        from approvals import triage as inbox

        monkeypatch.setattr(inbox, "COUNTED_LIMIT", 2)
        for _ in range(3):
            run_until_paused("payer", self.users["reviewer"])
        html = self.client.get("/").content.decode()
        assert '<option value="payer">payer</option>' in html
        assert "data-count" not in html
        run_until_paused("asker", self.users["reviewer"])
        monkeypatch.setattr(inbox, "COUNTED_LIMIT", 4)
        html = self.client.get("/").content.decode()
        assert '<option value="payer" data-count="3">payer (3)</option>' in html
        assert '<option value="asker" data-count="1">asker (1)</option>' in html

    def test_it_counts_what_waits_per_agent_and_per_tool_whatever_the_filters(self) -> None:
        run_until_paused("payer", self.users["reviewer"])
        run_until_paused("payer", self.users["reviewer"])
        run_until_paused("pair", self.users["reviewer"])
        run_until_paused("asker", self.users["reviewer"])
        html = self.client.get("/?agent=asker").content.decode()
        assert '<option value="pair" data-count="2">pair (2)</option>' in html
        assert '<option value="transfer_funds" data-count="2">transfer_funds (2)</option>' in html
        assert '<option value="ask_user" data-count="1">ask_user (1)</option>' in html
        assert '<option value="payer" data-count="2">payer (2)</option>' in html
        assert '<option value="asker" data-count="1" selected>asker (1)</option>' in html
        assert '<option value="send_email" data-count="2">send_email (2)</option>' in html
        assert '<option value="delete_records" data-count="0">delete_records (0)</option>' in html
        assert "Sort and filter" in html and " · 1 on" in html

    def test_it_filters_by_agent_tool_and_kind(self) -> None:
        run_until_paused("payer", self.users["reviewer"])
        run_until_paused("asker", self.users["reviewer"])
        cases = {
            "agent=asker": "ask_user",
            "tool=transfer_funds": "transfer_funds",
            "kind=input": "ask_user",
            "kind=confirmation": "transfer_funds",
        }
        for query, tool in cases.items():
            html = self.client.get(f"/?{query}").content.decode()
            assert re.findall(r'data-tool="([a-z_]+)"', html) == [tool], query
            assert "<title>(1) Inbox" in html

    def test_calls_made_together_show_their_group(self) -> None:
        thread = run_until_paused("pair", self.users["reviewer"])
        run_until_paused("payer", self.users["reviewer"])
        html = self.client.get("/").content.decode()
        first, second = Suspension.objects.filter(thread=thread)
        assert first.group == second.group
        assert html.count(f'data-group="{first.group}"') == 2
        assert html.count('<span class="group-size">One of 2 calls made together</span>') == 2
        # The payer's card, and the empty skeleton static/js/cards.js clones.
        assert html.count('<span class="group-size"></span>') == 2

    def test_an_input_suspension_offers_an_answer_box_instead_of_approve(self) -> None:
        run_until_paused("asker", self.users["reviewer"])
        html = self.client.get("/").content.decode()
        card = html[html.index('<article class="card" id="s-') : html.index("</article>")]
        assert 'data-action="answer"' in card and 'data-action="approve"' not in card

    def test_a_reviewer_without_the_decide_permission_sees_no_buttons(self) -> None:
        from django.contrib.auth.models import Permission

        run_until_paused("payer", self.users["reviewer"])
        viewer = self.users["outsider"]
        viewer.user_permissions.add(Permission.objects.get(codename="view_suspension"))
        client = Client()
        client.force_login(viewer)
        html = client.get("/").content.decode()
        card = html[html.index('<article class="card" id="s-') : html.index("</article>")]
        # Reading the thread's history is all they may do.
        assert card.count("data-action") == card.count('data-action="history"') == 1
