"""Every page that shows untrusted values shows them within the display limits (issue 31): a
1 MB tool argument, message or result is cut, says how much was cut, and links to the whole."""

import json
import re
import uuid
from datetime import timedelta
from typing import Any

import pytest
from django.test import Client
from django.utils import timezone
from google.protobuf import json_format

from a2a_server import mapping
from agents import decisions, events
from agents.models import Event, Suspension
from approvals import excerpt
from notify import compose
from tests.approvals import state

MB = 1024 * 1024
# Markup first, so a page that shows it whole unescaped would show it as markup.
HUGE = "<b>" + "é" * (MB // 2)


def pending_cards(n: int, huge: int) -> list[Suspension]:
    """`n` pending requests of one thread, the `huge` most urgent of which carry a 1 MB
    argument, made as rows the way the engine makes them."""
    thread, [first] = state.suspended(calls=[("send_email", {"to": "a@example.com"})])
    soon = timezone.now() + timedelta(minutes=5)
    rows = []
    for i in range(n):
        args = {"to": f"r{i}@example.com", "subject": "Hello", "body": "Short."}
        if i < huge:
            args["body"] = HUGE
        rows.append(
            Suspension(
                id=uuid.uuid4(),
                thread=thread,
                frame=first.frame,
                group=uuid.uuid4(),
                agent_name=first.agent_name,
                lineage=first.lineage,
                tool_use_id=f"toolu_{i}",
                tool_name="send_email",
                tool_input=args,
                tool_schema=first.tool_schema,
                kind=first.kind,
                prompt=HUGE if i < huge else "Mail them.",
                timeout=600,
                expires_at=soon + timedelta(seconds=i if i < huge else 600 + i),
                policy=first.policy,
            )
        )
    Suspension.objects.filter(pk=first.pk).update(status=Suspension.Status.CANCELLED)
    return Suspension.objects.bulk_create(rows)


class InboxLimitsTestCase:
    @pytest.fixture(autouse=True)
    def setup(self, users: dict[str, Any]) -> None:
        self.users = users
        self.client = Client()
        self.client.force_login(users["reviewer"])

    def test_it_keeps_the_inbox_under_a_megabyte_with_a_thousand_cards_some_huge(
        self, api: Any
    ) -> None:
        made = pending_cards(1000, huge=20)
        r = self.client.get("/?order=urgent")
        assert r.status_code == 200
        html = r.content.decode()
        assert len(r.content) < MB
        shown = re.findall(r'<article class="card[^"]*" id="s-([0-9a-f-]+)"', html)
        assert len(shown) == 100
        for s in made[:20]:
            assert str(s.id) in shown
            card = html[html.index(f'id="s-{s.id}"') :]
            card = card[: card.index("</article>")]
            # Said how much is left out, with a link to the whole request.
            assert f'<a href="/api/suspensions/{s.id}"' in card
            assert re.search(r"… 1,0[0-9]{2},[0-9]{3} more bytes", card)
            # Nothing of it is markup, and the page never holds the cut text as arguments to
            # edit: an edit would send it.
            assert "<b>" not in card and "&lt;b&gt;" in card
            assert 'data-args=""' in card
            whole = json.dumps(s.tool_input, indent=2, ensure_ascii=False)
            assert f'<span class="args-size">{excerpt.size(whole):,}</span> bytes' in card
            assert '<p class="args-cut">' in card
            assert "é" * 4096 not in card
            # Decidable: the buttons are there.
            assert 'data-action="approve"' in card and 'data-action="reject"' in card
        # The whole value is one request away, as JSON text.
        whole = api("reviewer").get(f"/api/suspensions/{made[0].id}")
        assert whole.status_code == 200 and whole.json()["input"]["body"] == HUGE

    def test_a_card_that_fits_is_whole_and_editable(self) -> None:
        thread, [s] = state.suspended()
        html = self.client.get("/").content.decode()
        assert "&quot;amount&quot;: 200" in html
        assert 'data-args-size="0"' in html
        assert 'class="cut"' not in html
        assert '<p class="args-cut" hidden>' in html

    def test_an_argument_over_the_value_limit_in_a_card_that_fits_is_cut_in_the_table_only(
        self, settings: Any
    ) -> None:
        settings.DISPLAY_MAX_VALUE_BYTES = 100
        thread, [s] = state.suspended(calls=[("send_email", {"to": "a@b.c", "body": "z" * 500})])
        html = self.client.get("/").content.decode()
        row = re.search(r'<tr data-field="body">.*?</tr>', html, re.S).group()
        assert "z" * 100 in row and "z" * 101 not in row
        assert "… 400 more bytes" in row
        # The raw JSON view and the editor have it whole: the card is small enough.
        assert html.count("z" * 500) >= 2


class ThreadPageLimitsTestCase:
    @pytest.fixture(autouse=True)
    def setup(self, users: dict[str, Any]) -> None:
        self.client = Client()
        self.client.force_login(users["reviewer"])

    def test_it_cuts_each_transcript_line_and_card_and_links_to_the_whole_event(self) -> None:
        thread, [s] = state.suspended(calls=[("send_email", {"to": "a@b.c", "body": HUGE})])
        said = events.record(Event.Type.AGENT_MESSAGE, thread_id=thread.pk, payload={"text": HUGE})
        result = events.record(
            Event.Type.TOOL_RESULT,
            thread_id=thread.pk,
            payload={"tool": "lookup", "tool_use_id": "toolu_x", "content": HUGE},
        )
        r = self.client.get(f"/threads/{thread.pk}/")
        assert r.status_code == 200
        assert len(r.content) < 100 * 1024
        html = r.content.decode()
        assert "<b>" not in html
        for e in (said, result):
            line = html[html.index(f'data-event="{e.id}"') :]
            line = line[: line.index("</li>")]
            assert f'<a href="/api/events/{e.id}"' in line
            assert re.search(r"… 1,0[0-9]{2},[0-9]{3} more bytes", line)
        assert f'<a href="/api/suspensions/{s.id}"' in html
        assert 'data-action="approve"' in html


class AuditLimitsTestCase:
    def test_the_audit_page_cuts_arguments_results_and_answers(self, users: dict[str, Any]) -> None:
        thread, [s] = state.suspended(calls=[("send_email", {"to": "a@b.c", "body": HUGE})])
        decisions.decide(s, users["reviewer"], {"approved": False, "reason": "Too big."})
        result = events.record(
            Event.Type.TOOL_RESULT,
            thread_id=thread.pk,
            payload={"tool": "send_email", "tool_use_id": s.tool_use_id, "content": HUGE},
        )
        client = Client()
        client.force_login(users["admin"])
        r = client.get("/audit/")
        assert r.status_code == 200
        assert len(r.content) < 100 * 1024
        html = r.content.decode()
        assert f'<a href="/api/suspensions/{s.id}"' in html
        assert f'<a href="/api/events/{result.id}"' in html
        assert "<b>" not in html


class EmailAndStatusLimitsTestCase:
    def test_an_email_cuts_the_prompt_and_arguments_and_says_where_they_are_whole(
        self, db: Any
    ) -> None:
        thread, [s] = state.suspended(calls=[("send_email", {"to": "a@b.c", "body": HUGE})])
        s.prompt = HUGE
        event = Event.objects.filter(suspension=s).get()
        subject, body = compose.message("raised", [s], event, timezone.now())
        assert len(body.encode()) < 16 * 1024
        assert body.count(f"/api/suspensions/{s.id})") == 2
        assert len(re.findall(r"… 1,0[0-9]{2},[0-9]{3} more bytes", body)) == 2

    def test_the_a2a_status_text_is_cut_and_its_data_whole(self) -> None:
        data = {
            "suspensions": [
                {
                    "suspension": "s-1",
                    "kind": "input",
                    "agent": "asker",
                    "tool": "ask_user",
                    "arguments": {"question": HUGE},
                    "question": HUGE,
                }
            ]
        }
        m = mapping.awaited_message("t-1", data)
        text = m.parts[0].text
        assert len(text.encode()) < 8 * 1024
        assert re.search(r"… 1,0[0-9]{2},[0-9]{3} more bytes", text)
        assert "/api/suspensions/s-1" in text
        data_part = json_format.MessageToDict(m.parts[1])
        assert json.dumps(data_part, ensure_ascii=False).count(HUGE) == 2
