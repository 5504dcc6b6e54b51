"""The pieces of the pages (approvals.fragments, approvals.inbox.counts_fragment): the pages ask
for them when an event concerns them, so each is checked as its page is (a login, the page's
permission), shows what the page shows that reader, escaped and bounded by the same templates."""

import json
import re
from typing import Any

import pytest
from django.test import Client

from agents import decisions, events
from agents.models import Event, Suspension, Thread
from tests.approvals.test_display_limits import HUGE, MB, pending_cards
from tests.approvals.test_inbox_page import AGENTS as INBOX_AGENTS
from tests.approvals.test_inbox_page import run_until_paused
from tests.approvals.test_thread_page import AGENTS as THREAD_AGENTS
from tests.approvals.test_thread_page import start


def article(html: str, sid: Any) -> str:
    """The card of suspension `sid` as it stands in a page."""
    at = html.index(f'id="s-{sid}"')
    begin = html.rindex("<article", 0, at)
    return html[begin : html.index("</article>", at) + len("</article>")]


def entries(html: str) -> list[str]:
    return re.findall(r'<li class="entry[^"]*" data-event="(\d+)"', html)


class FragmentsTestCase:
    @pytest.fixture(autouse=True)
    def setup(self, users: dict[str, Any], load_agents: Any) -> None:
        load_agents(INBOX_AGENTS)
        load_agents(THREAD_AGENTS)
        self.users = users
        self.client = Client()
        self.client.force_login(users["reviewer"])

    def urls(self) -> list[str]:
        thread = run_until_paused("payer", self.users["reviewer"])
        s = Suspension.objects.get(thread=thread)
        return [
            f"/fragments/suspensions/{s.id}/card",
            f"/fragments/threads/{thread.id}/entries?after=0",
            f"/fragments/threads/{thread.id}/state",
            f"/fragments/threads/{thread.id}/batch",
            f"/fragments/threads/{thread.id}/history",
            f"/fragments/threads/{thread.id}/reply",
            "/fragments/inbox/counts",
        ]

    def test_each_needs_a_login_and_the_pages_permission(self) -> None:
        outsider = Client()
        outsider.force_login(self.users["outsider"])
        for url in self.urls():
            anonymous = Client().get(url)
            assert anonymous.status_code == 302 and anonymous["Location"].startswith("/login/")
            assert outsider.get(url).status_code == 403, url
            r = self.client.get(url)
            assert r.status_code == 200, url
            assert r["Cache-Control"] == "no-store"
            assert r["Content-Type"].startswith("text/html")
            assert self.client.post(url).status_code == 405, url

    def test_unknown_or_malformed_ids_are_not_found(self) -> None:
        for url in (
            "/fragments/suspensions/00000000-0000-0000-0000-000000000000/card",
            "/fragments/suspensions/nope/card",
            "/fragments/threads/00000000-0000-0000-0000-000000000000/entries",
            "/fragments/threads/nope/state",
        ):
            assert self.client.get(url).status_code == 404, url

    def test_a_card_is_the_inbox_pages_card_escaped(self) -> None:
        pair = run_until_paused("pair", self.users["reviewer"])
        thread = run_until_paused("payer", self.users["reviewer"])
        s = Suspension.objects.get(thread=thread)
        page = self.client.get("/").content.decode()
        piece = self.client.get(f"/fragments/suspensions/{s.id}/card?in=inbox").content.decode()
        # One renderer: the piece is the page's card, byte for byte.
        assert piece.strip() == article(page, s.id)
        assert "&lt;script&gt;alert(1)&lt;/script&gt;" in piece
        assert "<script>" not in piece
        assert 'data-action="approve"' in piece
        # With how many calls of its group wait, as the inbox counts them.
        one, two = Suspension.objects.filter(thread=pair)
        piece = self.client.get(f"/fragments/suspensions/{one.id}/card?in=inbox").content.decode()
        assert piece.strip() == article(page, one.id)
        assert "One of 2 calls made together" in piece
        decisions.decide(two, self.users["teammate"], {"approved": False, "reason": "no"})
        piece = self.client.get(f"/fragments/suspensions/{one.id}/card?in=inbox").content.decode()
        assert "calls made together" not in piece

    def test_a_card_says_what_the_reader_may_do(self) -> None:
        thread = run_until_paused("payer", self.users["reviewer"])
        s = Suspension.objects.get(thread=thread)
        decisions.decide(s, self.users["teammate"], {"approved": False, "reason": "<i>no</i>"})
        piece = self.client.get(f"/fragments/suspensions/{s.id}/card").content.decode()
        assert 'data-status="rejected"' in piece and "decided" in piece
        assert "&lt;i&gt;no&lt;/i&gt;" in piece and "<i>no" not in piece
        # A reader who may look but not decide gets no decision controls.
        admin = Client()
        admin.force_login(self.users["operator"])
        thread = run_until_paused("payer", self.users["reviewer"])
        s = Suspension.objects.get(thread=thread)
        r = admin.get(f"/fragments/suspensions/{s.id}/card")
        assert r.status_code == 200 and 'data-action="approve"' not in r.content.decode()
        # Four eyes: who started the run reads why they may not decide it, as on the page.
        mine = start("boss", self.users["reviewer"])
        s = Suspension.objects.get(thread=mine)
        piece = self.client.get(f"/fragments/suspensions/{s.id}/card").content.decode()
        assert "someone else must decide it (four eyes)" in piece and "read-only" in piece

    def test_a_huge_card_is_bounded_as_on_the_page(self, api: Any) -> None:
        [huge] = pending_cards(1, huge=1)
        piece = self.client.get(f"/fragments/suspensions/{huge.id}/card?in=inbox")
        html = piece.content.decode()
        assert len(piece.content) < MB // 8
        assert f"/api/suspensions/{huge.id}" in html  # the cut links to the whole
        assert HUGE[:200] not in html and "&lt;b&gt;" in html
        assert html.strip() == article(self.client.get("/").content.decode(), huge.id)

    def test_entries_are_the_thread_pages_lines(self) -> None:
        thread = start("boss", self.users["reviewer"], "Pay <b>them</b>")
        s = Suspension.objects.get(thread=thread)
        page = self.client.get(f"/threads/{thread.id}/").content.decode()
        piece = self.client.get(f"/fragments/threads/{thread.id}/entries?after=0")
        html = piece.content.decode()
        assert entries(html) == entries(page) and entries(html)
        transcript = page[page.index('<ol class="transcript" id="transcript">') :]
        transcript = transcript[: transcript.index("</ol>\n<ol")]
        assert html.split() == transcript.split()[3:]
        assert "Pay &lt;b&gt;them&lt;/b&gt;" in html and "<img src=x" not in html
        # The call waiting for a decision is its card, not a line.
        called = Event.objects.get(
            thread=thread,
            type="TOOL_CALLED",
            suspension__isnull=True,
            payload__tool_use_id=s.tool_use_id,
        )
        assert str(called.id) not in entries(html) and f'id="s-{s.id}"' in html
        # After an id, and by ids (a burst the socket delivered), in id order.
        ids = [int(i) for i in entries(html)]
        after = self.client.get(f"/fragments/threads/{thread.id}/entries?after={ids[1]}")
        assert entries(after.content.decode()) == [str(i) for i in ids[2:]]
        named = f"{ids[3]},{ids[0]},x,{called.id}"
        by_ids = self.client.get(f"/fragments/threads/{thread.id}/entries?ids={named}")
        assert entries(by_ids.content.decode()) == [str(ids[0]), str(ids[3])]

    def test_entries_of_another_thread_are_not_shown(self) -> None:
        one = start("boss", self.users["reviewer"])
        other = start("chatty", self.users["reviewer"])
        theirs = list(Event.objects.filter(thread=other).values_list("id", flat=True))
        named = ",".join(str(i) for i in theirs)
        r = self.client.get(f"/fragments/threads/{one.id}/entries?ids={named}")
        assert entries(r.content.decode()) == []

    def test_huge_lines_are_bounded(self) -> None:
        thread = start("boss", self.users["reviewer"], HUGE)
        r = self.client.get(f"/fragments/threads/{thread.id}/entries?after=0")
        assert len(r.content) < MB // 8
        assert "/api/events/" in r.content.decode()

    def test_the_thread_state_is_the_pages(self) -> None:
        thread = start("boss", self.users["reviewer"])
        html = self.client.get(f"/fragments/threads/{thread.id}/state").content.decode()
        assert 'id="thread-status" data-status="suspended"' in html
        assert '<ol id="stack"><li>boss</li><li>skill:writer</li></ol>' in html

    def test_the_thread_state_follows_its_stack_and_status_among_other_events(self) -> None:
        thread = start("boss", self.users["reviewer"])
        for kind, payload in [
            ("AGENT_MESSAGE", {"text": "working"}),
            ("FRAME_POPPED", {"frame": "skill:writer"}),
            ("AGENT_MESSAGE", {"text": "back in boss"}),
            ("AGENT_RESUMED", {"tool": "x", "lane": 7}),  # an instance's: not the thread's
        ]:
            events.record(kind, thread_id=thread.pk, payload=payload)
        url = f"/fragments/threads/{thread.id}/state"
        html = self.client.get(url).content.decode()
        assert 'id="thread-status" data-status="suspended"' in html
        assert '<ol id="stack"><li>boss</li></ol>' in html
        events.record("THREAD_COMPLETED", thread_id=thread.pk, payload={})
        html = self.client.get(url).content.decode()
        assert 'id="thread-status" data-status="completed"' in html
        assert '<ol id="stack"></ol>' in html

    def test_the_counts_follow_the_filters(self) -> None:
        run_until_paused("payer", self.users["reviewer"])
        run_until_paused("pair", self.users["reviewer"])
        html = self.client.get("/fragments/inbox/counts").content.decode()
        assert '<span class="count" id="pending-count">3</span>' in html
        assert '<option value="payer" data-count="1">payer (1)</option>' in html
        assert '<option value="send_email" data-count="2">send_email (2)</option>' in html
        html = self.client.get("/fragments/inbox/counts?agent=pair").content.decode()
        assert '<span class="count" id="pending-count">2</span>' in html
        assert 'value="pair" data-count="2" selected' in html

    def test_a_thread_waiting_for_a_reply_is_its_reply_card_until_answered(self) -> None:
        thread = start("chatty", self.users["reviewer"])
        assert thread.status == "waiting_input"
        html = self.client.get(f"/fragments/threads/{thread.id}/reply").content.decode()
        assert f'id="r-{thread.id}"' in html and "Which colour?" in html
        # Under filters that leave it out, and once it waits no more: nothing.
        assert self.client.get(f"/fragments/threads/{thread.id}/reply?tool=x").content == b""
        Thread.objects.filter(pk=thread.pk).update(status="running")
        assert self.client.get(f"/fragments/threads/{thread.id}/reply").content == b""

    def test_the_recent_history_is_the_threads_last_lines(self) -> None:
        thread = start("boss", self.users["reviewer"], "Pay <b>them</b>")
        html = self.client.get(f"/fragments/threads/{thread.id}/history").content.decode()
        assert "calls use_skill" in html and "calls transfer_funds" in html
        assert "Pay &lt;b&gt;them&lt;/b&gt;" in html and "<b>them" not in html
        assert html.count("<li") <= 8

    def test_the_batch_panel_is_hidden_without_instances(self) -> None:
        thread = start("boss", self.users["reviewer"])
        html = self.client.get(f"/fragments/threads/{thread.id}/batch").content.decode()
        assert 'id="batch" aria-labelledby="batch-title" hidden' in html
        assert 'id="usage"' in html


class ReviewTestCase:
    """An edit is checked by the server only: the page posts it, the server answers with the
    field errors in a reviewer's words, or with what the edit changes; nothing is decided."""

    @pytest.fixture(autouse=True)
    def setup(self, users: dict[str, Any], load_agents: Any) -> None:
        load_agents(INBOX_AGENTS)
        self.users = users
        self.client = Client()
        self.client.force_login(users["reviewer"])
        thread = run_until_paused("payer", users["reviewer"])
        self.s = Suspension.objects.get(thread=thread)
        self.url = f"/fragments/suspensions/{self.s.id}/review"

    def review(self, args: Any, client: Client | None = None) -> Any:
        body = json.dumps({"modifiedArgs": args})
        return (client or self.client).post(self.url, body, content_type="application/json")

    def test_it_needs_a_reviewer(self) -> None:
        assert Client().post(self.url).status_code == 302
        for who in ("outsider", "operator"):
            other = Client()
            other.force_login(self.users[who])
            assert self.review({}, other).status_code == 403
        assert self.client.get(self.url).status_code == 405

    def test_refused_fields_are_in_a_reviewers_words(self) -> None:
        events = Event.objects.count()
        r = self.review({"from_account": "", "to_account": "B", "amount": -5, "memo": 1})
        assert r.status_code == 400
        assert r.json()["fields"] == {
            "modifiedArgs.from_account": "must not be empty",
            "modifiedArgs.amount": "must be greater than 0",
            "modifiedArgs.memo": "is not a field of this tool",
        }
        r = self.review({"to_account": "B", "amount": "lots"})
        assert r.json()["fields"] == {
            "modifiedArgs.from_account": "is required",
            "modifiedArgs.amount": "must be a number",
        }
        assert list(self.review([1]).json()["fields"]) == ["modifiedArgs"]
        assert Event.objects.count() == events
        self.s.refresh_from_db()
        assert self.s.status == "pending" and self.s.modified_args is None

    def test_a_fitting_edit_shows_what_it_changes_escaped(self) -> None:
        args = {**self.s.tool_input, "amount": 150, "to_account": "<i>B-9</i>"}
        r = self.review(args)
        assert r.status_code == 200 and r["Cache-Control"] == "no-store"
        body = r.json()
        assert body["changed"] == 2
        html = body["html"]
        assert re.findall(r'<tr class="changed"><th scope="row">(\w+)</th>', html) == [
            "to_account",
            "amount",
        ]
        assert "&lt;i&gt;B-9&lt;/i&gt;" in html and "<i>B-9" not in html
        same = self.review(self.s.tool_input).json()
        assert same["changed"] == 0 and "Nothing changed" in same["html"]
        self.s.refresh_from_db()
        assert self.s.status == "pending" and self.s.modified_args is None

    def test_the_edit_form_is_rendered_from_the_schema_escaped(self) -> None:
        url = f"/fragments/suspensions/{self.s.id}/form"
        for who in ("outsider", "operator"):
            other = Client()
            other.force_login(self.users[who])
            assert other.get(url).status_code == 403
        r = self.client.get(url)
        assert r.status_code == 200 and r["Cache-Control"] == "no-store"
        html = r.content.decode()
        assert 'data-prefer="form"' in html
        assert f'<input type="number" id="f-{self.s.id}-amount" name="field-amount"' in html
        assert re.search(r'data-field="amount" data-kind="number" data-required="true"', html)
        options = re.findall(r'<option value="[^"]*"[^>]*>([^<]*)</option>', html)
        assert options[:1] == ["(not set)"] and "EUR" in options
        # The agent's value goes in as text (invariant 6).
        assert 'value="&lt;script&gt;alert(1)&lt;/script&gt;"' in html and "<script>" not in html
        # An edit from the JSON editor, as a form: its own fields too; one whose text holds a
        # direction-changing character is better edited as JSON.
        edit = {**self.s.tool_input, "amount": 5, "note": "hi"}
        body = self.client.post(url, json.dumps({"modifiedArgs": edit}), "application/json")
        assert 'name="field-note"' in body.json()["html"] and 'value="5"' in body.json()["html"]
        edit["to_account"] = "B\u202e2"
        body = self.client.post(url, json.dumps({"modifiedArgs": edit}), "application/json")
        assert 'data-prefer="json"' in body.json()["html"]
        assert self.client.post(url, "[1]", "application/json").status_code == 400

    def test_refused_fields_come_in_the_cards_order_on_every_database(self) -> None:
        # The schema's keys come back sorted from PostgreSQL's jsonb: the order is the card's.
        r = self.review({"from_account": "A", "to_account": "", "amount": -5, "memo": 1})
        assert list(r.json()["fields"]) == [
            "modifiedArgs.to_account",
            "modifiedArgs.amount",
            "modifiedArgs.memo",
        ]
