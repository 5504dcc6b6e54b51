"""The audit trail: staff only, every suspension with its timeline, filters, CSV and JSON Lines."""

import csv
import io
import json
import re
from datetime import timedelta
from typing import Any

import pytest
from django.test import Client
from django.utils import timezone

from agents import decisions, starting
from agents.engine import Engine
from agents.models import AgentDefinition, Suspension, Thread
from tests.conftest import operator

AGENTS = """
agents:
  - name: payer
    model: scripted
    tools: [transfer_funds]
    script:
      - tool_calls:
          - name: transfer_funds
            input: {from_account: "=HYPERLINK(1)", to_account: B-2, amount: 200}
      - text: Done.
  - name: mailer
    model: scripted
    tools: [send_email]
    script:
      - tool_calls:
          - {name: send_email, input: {to: a@example.com, subject: Hi}}
      - text: Done.
"""


def decided(agent: str, user: Any, decision: dict[str, Any]) -> Suspension:
    """A run paused on its blocking call, decided by `user`, and resumed to the end."""
    # Started by the operator: whoever starts a run may not decide it (four eyes).
    thread = starting.start_thread(AgentDefinition.objects.get(name=agent), "go", operator())
    Engine().advance(thread.pk)
    s = Suspension.objects.get(thread=thread)
    decisions.decide(s, user, decision)
    Engine().advance(thread.pk)
    assert Thread.objects.get(pk=thread.pk).status == "completed"
    return Suspension.objects.select_related("decided_by").get(pk=s.pk)


class AuditTestCase:
    @pytest.fixture(autouse=True)
    def setup(self, users: dict[str, Any], load_agents: Any) -> None:
        load_agents(AGENTS)
        self.users = users
        self.staff = Client()
        self.staff.force_login(users["admin"])
        self.rejected = decided(
            "payer", users["reviewer"], {"approved": False, "reason": "wrong <b>payee</b>"}
        )
        self.edited = decided(
            "payer",
            users["teammate"],
            {
                "approved": True,
                "modifiedArgs": {"from_account": "A-1", "to_account": "B-2", "amount": 150},
            },
        )
        self.approved = decided("mailer", users["teammate"], {"approved": True})

    def test_it_is_for_staff_only(self) -> None:
        assert Client().get("/audit/").status_code == 302
        for who in ("reviewer", "outsider"):
            client = Client()
            client.force_login(self.users[who])
            for path in ("/audit/", "/audit/export.csv", "/audit/export.jsonl"):
                assert client.get(path).status_code == 403, (who, path)

    def test_it_shows_each_suspension_with_its_timeline(self) -> None:
        html = self.staff.get("/audit/").content.decode()
        item = html[html.index(f'id="a-{self.rejected.id}"') :]
        item = item[: item.index("</li>\n")]
        assert "wrong &lt;b&gt;payee&lt;/b&gt;" in item and "<b>payee" not in item
        assert '<span class="reviewer">alice</span>' in item
        for step in ("Raised", "Decided", "Resumed", "Tool error"):
            assert f"<strong>{step}</strong>" in item, step

    def test_it_names_the_reviewer_once_readably_and_times_carry_their_zone(self) -> None:
        bob = self.users["teammate"]
        bob.first_name, bob.last_name = "Bob", "Stone"
        bob.save()
        html = self.staff.get("/audit/").content.decode()
        item = html[html.index(f'id="a-{self.approved.id}"') :]
        item = item[: item.index("</li>\n")]
        assert ' · decided by <span class="reviewer">Bob Stone</span>' in item
        raised = self.approved.created_at.strftime("%Y-%m-%d %H:%M:%S")
        assert f'data-local="date">{raised} UTC</time>' in item
        assert re.search(r'data-local="time">\d\d:\d\d:\d\d UTC</time> <strong>Decided', item)

    def test_its_filters_offer_what_the_trail_holds(self) -> None:
        html = self.staff.get("/audit/").content.decode()
        for name, options in {
            "agent": ["", "mailer", "payer"],
            "tool": ["", "send_email", "transfer_funds"],
            "reviewer": ["", "alice", "bob"],
        }.items():
            select = html[html.index(f'<select name="{name}"') :]
            select = select[: select.index("</select>")]
            assert re.findall(r'<option value="([^"]*)"', select) == options, name
        assert '<input type="date" name="since"' in html
        # A value the trail does not hold is refused, not applied as a filter that finds nothing.
        html = self.staff.get("/audit/?agent=nobody").content.decode()
        assert "Select a valid choice" in html and f'id="a-{self.approved.id}"' in html

    def test_an_edit_is_shown_as_a_diff_of_the_arguments(self) -> None:
        html = self.staff.get("/audit/").content.decode()
        item = html[html.index(f'id="a-{self.edited.id}"') :]
        item = item[: item.index("</li>\n")]
        assert (
            '<tr class="changed"><th scope="row">amount</th>'
            "<td><del>200</del></td><td><ins>150</ins></td></tr>" in item
        )
        assert '<th scope="row">from_account</th><td><del>&quot;=HYPERLINK(1)&quot;</del>' in item

    def test_it_filters_by_agent_tool_reviewer_outcome_and_date(self) -> None:
        today = timezone.now().date()
        cases = {
            "agent=mailer": {self.approved.id},
            "tool=transfer_funds": {self.rejected.id, self.edited.id},
            "reviewer=alice": {self.rejected.id},
            "outcome=approved": {self.edited.id, self.approved.id},
            f"since={today}&until={today}": {self.rejected.id, self.edited.id, self.approved.id},
            f"since={today + timedelta(days=1)}": set(),
            "outcome=rejected&reviewer=alice&tool=transfer_funds": {self.rejected.id},
        }
        for query, expected in cases.items():
            rows = self.staff.get(f"/audit/export.jsonl?{query}")
            found = {
                json.loads(line)["id"] for line in b"".join(rows.streaming_content).splitlines()
            }
            assert found == {str(pk) for pk in expected}, query
            html = self.staff.get(f"/audit/?{query}").content.decode()
            for s in (self.rejected, self.edited, self.approved):
                assert (f'id="a-{s.id}"' in html) == (s.id in expected), query

    def test_the_jsonl_export_carries_the_reviewer_and_the_reason(self) -> None:
        r = self.staff.get("/audit/export.jsonl?reviewer=alice")
        assert r["Content-Type"].startswith("application/x-ndjson")
        [row] = [json.loads(line) for line in b"".join(r.streaming_content).splitlines()]
        assert row["decided_by"] == "alice" and row["reason"] == "wrong <b>payee</b>"
        assert row["status"] == "rejected" and row["approved"] is False
        assert row["arguments"]["amount"] == 200 and row["thread_status"] == "completed"

    def test_the_csv_export_carries_the_reviewer_and_the_edit(self) -> None:
        r = self.staff.get("/audit/export.csv?tool=transfer_funds")
        assert r["Content-Type"].startswith("text/csv")
        rows = list(csv.DictReader(io.StringIO(b"".join(r.streaming_content).decode())))
        by_id = {row["id"]: row for row in rows}
        assert set(by_id) == {str(self.rejected.id), str(self.edited.id)}
        rejected = by_id[str(self.rejected.id)]
        assert rejected["decided_by"] == "alice" and rejected["reason"] == "wrong <b>payee</b>"
        edited = by_id[str(self.edited.id)]
        assert json.loads(edited["modified_args"])["amount"] == 150
        assert edited["decided_by"] == "bob" and edited["approved"] == "True"
        # The arguments column is JSON text, which opens with "{": never a live formula.
        assert json.loads(edited["arguments"])["from_account"] == "=HYPERLINK(1)"

    def test_the_csv_export_defuses_text_a_spreadsheet_would_run(self) -> None:
        s = decided("mailer", self.users["reviewer"], {"approved": False, "reason": "=SUM(A1:A9)"})
        r = self.staff.get("/audit/export.csv?agent=mailer&outcome=rejected")
        [row] = list(csv.DictReader(io.StringIO(b"".join(r.streaming_content).decode())))
        assert row["id"] == str(s.id) and row["reason"] == "'=SUM(A1:A9)"

    def test_a_bad_date_is_reported_and_not_applied(self) -> None:
        html = self.staff.get("/audit/?since=yesterday").content.decode()
        assert "Enter a valid date" in html
