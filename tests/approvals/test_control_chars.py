"""Invisible and direction-changing characters in untrusted text are shown marked, not applied."""

import json
from typing import Any

import pytest
from django.template import Context, Template
from django.test import Client

from agents import decisions
from approvals.templatetags.visible import json_escaped_controls, visible
from tests.approvals import state

RLO = "\u202e"
ACCOUNT = f"DE44 {RLO}9876 5432"  # reads "DE44 2345 6789" when the override is applied
MARKER = '<span class="ctl">[U+202E]</span>'


class VisibleFilterTestCase:
    def test_it_marks_each_control_and_escapes_the_rest(self) -> None:
        assert visible(f"<b>{ACCOUNT}</b>") == f"&lt;b&gt;DE44 {MARKER}9876 5432&lt;/b&gt;"

    @pytest.mark.parametrize(
        "char",
        ["\u202a", "\u202d", "\u2066", "\u2069", "\u200e", "\u200f", "\u061c", "\u200b", "\u200d"]
        + ["\u2060", "\ufeff", "\x00", "\x1b", "\r", "\x7f", "\x85", "\U000e0041"],
    )
    def test_it_marks_invisible_characters(self, char: str) -> None:
        marked = visible(f"a{char}b")
        assert char not in marked
        assert marked == f'a<span class="ctl">[U+{ord(char):04X}]</span>b'

    def test_it_keeps_newlines_tabs_and_ordinary_text(self) -> None:
        text = "line one\n\tline two: élan, 日本, עברית, 🙂"
        assert visible(text) == text

    def test_it_is_used_by_templates_with_autoescape(self) -> None:
        html = Template("{% load visible %}{{ v|visible }}").render(Context({"v": f"<i>{RLO}"}))
        assert html == f"&lt;i&gt;{MARKER}"

    def test_the_editor_text_is_the_same_json_with_the_controls_escaped(self) -> None:
        text = json.dumps({"to": ACCOUNT, "tag": "\U000e0041"}, ensure_ascii=False)
        escaped = json_escaped_controls(text)
        assert RLO not in escaped and "\\u202e" in escaped
        assert json.loads(escaped) == json.loads(text)


class ControlCharsPagesTestCase:
    @pytest.fixture(autouse=True)
    def setup(self, users: dict[str, Any]) -> None:
        self.users = users
        self.client = Client()
        self.client.force_login(users["reviewer"])
        args = {"from_account": "A-1", "to_account": ACCOUNT, "amount": 200}
        self.thread, [self.s] = state.suspended(users["operator"], calls=[("transfer_funds", args)])

    def test_the_inbox_card_shows_the_marker_and_not_the_character(self) -> None:
        html = self.client.get("/").content.decode()
        card = html[html.index(f'id="s-{self.s.id}"') :]
        assert f"DE44 {MARKER}9876 5432" in card
        assert "\\u202e9876" in card  # the argument editor holds the JSON escape
        assert RLO not in html
        # The grant form offers no condition on that argument: its field would carry it whole.
        form = self.client.get(f"/fragments/suspensions/{self.s.id}/grant").content.decode()
        assert 'data-arg="to_account"' not in form and 'data-arg="amount"' in form
        assert RLO not in form

    def test_the_thread_page_and_the_audit_trail_show_the_marker(self) -> None:
        decisions.decide(
            self.s, self.users["reviewer"], {"approved": False, "reason": f"wrong {RLO}payee"}
        )
        html = self.client.get(f"/threads/{self.thread.pk}/").content.decode()
        assert MARKER in html and RLO not in html
        staff = Client()
        staff.force_login(self.users["admin"])
        audit = staff.get("/audit/").content.decode()
        assert f"wrong {MARKER}payee" in audit
        assert RLO not in audit
