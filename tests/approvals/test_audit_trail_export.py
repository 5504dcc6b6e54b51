"""The trail's export (/audit/events.jsonl and .csv): every event with the fields its hash
covers, so the verifier in docs/security.md recomputes the chains from the export alone."""

import csv
import io
import json
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from django.test import Client

from agents import decisions, events, starting
from agents.engine import Engine
from agents.models import AgentDefinition, Event, Suspension
from tests.conftest import ROOT

AGENTS = """
agents:
  - name: payer
    model: scripted
    tools: [transfer_funds]
    script:
      - text: Paying «Zoë» the big one.
        tool_calls:
          - {name: transfer_funds, input: {from_account: A-1, to_account: B-2, amount: 200}}
      - text: Done.
"""


def verifier() -> str:
    text = (ROOT / "docs" / "security.md").read_text()
    match = re.search(r"<!-- trail-verifier -->\n```python\n(.*?)```", text, re.S)
    assert match, "docs/security.md has no trail verifier"
    return match.group(1)


def check(tmp_path: Path, export: str) -> subprocess.CompletedProcess:
    """The docs' snippet, run as a separate program on an export file."""
    (tmp_path / "check_trail.py").write_text(verifier())
    (tmp_path / "audit-events.jsonl").write_text(export, encoding="utf-8")
    return subprocess.run(
        [sys.executable, "check_trail.py", "audit-events.jsonl"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=60,
    )


class TrailExportTestCase:
    @pytest.fixture(autouse=True)
    def setup(self, users: dict[str, Any], load_agents: Any) -> None:
        load_agents(AGENTS)
        self.users = users
        self.staff = Client()
        self.staff.force_login(users["admin"])
        self.threads = []
        for decision in ({"approved": True}, {"approved": False, "reason": "no =SUM(1)"}):
            agent = AgentDefinition.objects.get(name="payer")
            thread = starting.start_thread(agent, "go", users["operator"])
            Engine().advance(thread.pk)
            s = Suspension.objects.get(thread=thread)
            decisions.decide(s, users["reviewer"], decision)
            Engine().advance(thread.pk)
            self.threads.append(thread)
        events.record("TOKEN_CREATED", actor=users["admin"], payload={"name": "ci"})
        # Values whose JSON PostgreSQL's jsonb gives back in another form: hashed in that form.
        events.record(
            "AGENT_MESSAGE",
            thread_id=self.threads[0].pk,
            payload={"big": 1.5e16, "zero": -0.0, "pair": (1, 2), 7: "seven"},
        )

    def export(self, **params: str) -> str:
        r = self.staff.get("/audit/events.jsonl", params)
        assert r.status_code == 200 and r["Content-Type"].startswith("application/x-ndjson")
        return b"".join(r.streaming_content).decode()

    def test_it_is_for_staff_only(self) -> None:
        assert Client().get("/audit/events.jsonl").status_code == 302
        for who in ("reviewer", "outsider"):
            client = Client()
            client.force_login(self.users[who])
            for path in ("/audit/events.jsonl", "/audit/events.csv"):
                assert client.get(path).status_code == 403, (who, path)

    def test_every_event_is_exported_with_its_chain(self) -> None:
        rows = [json.loads(line) for line in self.export().splitlines()]
        stored = list(Event.objects.order_by("id"))
        assert [r["id"] for r in rows] == [e.id for e in stored]
        assert [(r["prev_hash"], r["hash"]) for r in rows] == [
            (e.prev_hash, e.hash) for e in stored
        ]
        decided = next(r for r in rows if r["type"] == "SUSPENSION_DECIDED")
        assert decided["actor"] == "alice" and decided["actor_id"] == self.users["reviewer"].pk
        assert decided["thread"] == str(self.threads[0].pk) and decided["suspension"]
        assert set(rows[0]) == {
            "id",
            "prev_hash",
            "type",
            "thread",
            "suspension",
            "actor_id",
            "actor",
            "created_at",
            "payload",
            "hash",
        }
        one = [
            json.loads(line) for line in self.export(thread=str(self.threads[1].pk)).splitlines()
        ]
        assert {r["thread"] for r in one} == {str(self.threads[1].pk)}
        assert self.export(thread="not-a-uuid") == ""

    def test_the_readme_verifier_passes_on_a_real_export(self, tmp_path: Path) -> None:
        run = check(tmp_path, self.export())
        assert run.returncode == 0, run.stdout + run.stderr
        assert run.stdout.strip() == "OK: 3 chains"
        one = check(tmp_path, self.export(thread=str(self.threads[0].pk)))
        assert one.returncode == 0 and one.stdout.strip() == "OK: 1 chains"

    def test_the_readme_verifier_fails_on_a_tampered_export(self, tmp_path: Path) -> None:
        lines = self.export().splitlines()
        at = next(i for i, line in enumerate(lines) if '"SUSPENSION_DECIDED"' in line)
        row = json.loads(lines[at])
        row["payload"]["approved"] = not row["payload"]["approved"]
        changed = [*lines[:at], json.dumps(row, ensure_ascii=False), *lines[at + 1 :]]
        run = check(tmp_path, "\n".join(changed) + "\n")
        assert run.returncode == 1
        assert f"event {row['id']}: content changed" in run.stderr

        dropped = [*lines[:at], *lines[at + 1 :]]
        run = check(tmp_path, "\n".join(dropped) + "\n")
        assert run.returncode == 1
        after = next(json.loads(line) for line in lines[at + 1 :] if row["thread"] in line)
        assert f"event {after['id']}: link broken" in run.stderr

    def test_the_csv_carries_the_same_fields(self) -> None:
        r = self.staff.get("/audit/events.csv")
        assert r.status_code == 200
        rows = list(csv.DictReader(io.StringIO(b"".join(r.streaming_content).decode())))
        stored = list(Event.objects.order_by("id"))
        assert [(int(r["id"]), r["hash"], r["prev_hash"]) for r in rows] == [
            (e.id, e.hash, e.prev_hash) for e in stored
        ]
        rejected = next(
            r for r in rows if r["type"] == "SUSPENSION_DECIDED" and "SUM" in r["payload"]
        )
        assert json.loads(rejected["payload"])["reason"] == "no =SUM(1)"

    def test_the_audit_page_links_the_exports(self) -> None:
        html = self.staff.get("/audit/").content.decode()
        assert 'href="/audit/events.jsonl"' in html and 'href="/audit/events.csv"' in html
