"""`manage.py review_eval`: past decisions (the audit export's JSONL) replayed against a
reviewer setting: its agreement with people, the approvals people rejected, its cost."""

import json
from io import StringIO
from pathlib import Path
from typing import Any

import pytest
from django.core.management import CommandError, call_command

from tests.reviewing.standin import MessagesStandIn

SETTING = """
model: scripted
mode: decide
may: [approve, reject]
script:
  - {when: {arg: amount, op: "<=", value: 5000}, decision: approve, reason: Within limits.}
  - {decision: reject, reason: Too large.}
"""


def row(n: int, amount: int, status: str, by: str = "alice", **more: Any) -> dict[str, Any]:
    """One line of /audit/export.jsonl (approvals.audit.record)."""
    return {
        "id": f"00000000-0000-0000-0000-00000000000{n}",
        "thread": f"10000000-0000-0000-0000-00000000000{n}",
        "agent": "payer",
        "lineage": "main",
        "tool": "transfer_funds",
        "kind": "confirmation",
        "status": status,
        "raised_at": f"2026-12-0{n}T10:00:00+00:00",
        "expires_at": None,
        "decided_at": f"2026-12-0{n}T10:05:00+00:00",
        "decided_by": by,
        "approved": status == "approved",
        "reason": "",
        "arguments": {"from_account": "A-1", "to_account": "B-2", "amount": amount},
        "modified_args": None,
        "response": None,
        "resumed_at": None,
        "thread_status": "completed",
        "receipt": None,
        **more,
    }


@pytest.fixture
def export(tmp_path: Path) -> Path:
    rows = [
        row(1, 40, "approved"),
        row(2, 4800, "rejected"),  # the model would approve it: a wrong approval
        row(3, 9000, "rejected"),
        row(4, 60, "approved", by="policy"),  # a rule decided: not people's
        row(5, 70, "timed_out"),  # the deadline decided
        row(6, 80, "approved", agent="other"),
    ]
    path = tmp_path / "audit.jsonl"
    path.write_text("\n".join(json.dumps(r) for r in rows) + "\n")
    return path


def test_it_prints_the_agreement_the_wrong_approvals_and_the_cost(
    db: Any, tmp_path: Path, export: Path
) -> None:
    setting = tmp_path / "review.yaml"
    setting.write_text(SETTING)
    out = StringIO()

    call_command(
        "review_eval", str(export), "--agent", "payer", "--setting", str(setting), stdout=out
    )

    lines = out.getvalue().splitlines()
    assert lines[0] == (
        "Replayed 3 decided requests of payer (transfer_funds) against scripted "
        "(decide, may approve, reject)."
    )
    assert (
        lines[1] == "Agreement with people: 2 of 3 it decided (66.7%); 0 left to people, 0 failed."
    )
    assert lines[2] == "Approvals people rejected: 1"
    assert lines[3].startswith("  00000000-0000-0000-0000-000000000002  ")
    assert '"amount": 4800' in lines[3] and "Within limits." in lines[3]
    assert lines[4] == "Rejections people approved: 0"
    assert lines[5].startswith("Cost: ") and "input tokens" in lines[5]
    assert not lines[5].startswith("Cost: 0 input")


def test_the_agents_own_setting_is_used_when_none_is_given(
    db: Any, export: Path, load_agents: Any
) -> None:
    load_agents(
        """
agents:
  - name: payer
    model: scripted
    tools: [transfer_funds]
    policy:
      tools:
        transfer_funds:
          review: {model: scripted, mode: shadow, script: [{decision: escalate, reason: Unsure.}]}
    script: [{text: hi}]
"""
    )
    out = StringIO()

    call_command(
        "review_eval", str(export), "--agent", "payer", "--tool", "transfer_funds", stdout=out
    )

    assert "Agreement with people: 0 of 0 it decided; 3 left to people, 0 failed." in out.getvalue()


def test_an_agent_without_a_setting_is_refused(db: Any, export: Path) -> None:
    with pytest.raises(CommandError, match="no agent 'payer'"):
        call_command("review_eval", str(export), "--agent", "payer")


def test_a_claude_setting_is_asked_through_the_api_and_its_tokens_are_the_cost(
    db: Any, tmp_path: Path, export: Path, messages_api: MessagesStandIn
) -> None:
    setting = tmp_path / "review.json"
    setting.write_text(json.dumps({"model": "claude-haiku-4-5", "mode": "shadow"}))
    messages_api.decide("approve", "Routine.")
    out = StringIO()

    call_command(
        "review_eval", str(export), "--agent", "payer", "--setting", str(setting), stdout=out
    )

    said = out.getvalue()
    assert "Agreement with people: 1 of 3 it decided (33.3%)" in said
    assert "Approvals people rejected: 2" in said
    # The stand-in counts 640 input and 41 output tokens a call.
    assert "Cost: 1,920 input tokens, 123 output tokens." in said
    assert len(messages_api.requests) == 3
    # Each replayed request is shown the people's decisions before it as its recent history.
    last = messages_api.requests[-1]["messages"][0]["content"]
    assert '"outcome": "approved"' in last and '"outcome": "rejected"' in last
