"""SQL statements per step of one approval cycle, so a regression on the hot path fails here.

The cycle is bench/cycles.py's: the start POST, the worker's first step (up to the suspension),
the decision POST, the worker's resume (to completion). Each is counted on its own, with the
database and broker of the run (PostgreSQL + Redis in CI's second half, SQLite otherwise); the
numbers are the ones issue 13 brought the path down to (bench/README.md), plus nothing.
"""

from typing import Any

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from agents import receipt_keys
from agents.engine import engine
from agents.models import Suspension, Thread
from notify import outbox as notify_outbox
from tests.conftest import Api, operator
from webhooks import fanout
from webpush import fanout as push_fanout

AGENT = """
agents:
  - name: bench
    model: scripted
    tools: [displayConfirmation]
    policy: {four_eyes: false}
    script:
      - tool_calls:
          - {name: displayConfirmation, input: {action: benchmark}}
      - text: done
"""

# The budget of each step: the statements it makes today (see the module's docstring). Before
# issue 13 (PostgreSQL): start 22, suspend 19, decide 18, resume 26, and no receivers check;
# after its first round 17, 18, 18, 26; its second 13, 14, 15, 22; its third 12, 13, 14, 21 (the
# receivers check at most once a second per process, not per nudge); its fifth 11, 12,
# 13, 18 (a new thread's chain not read; the lease's check in the status's update; the group's
# check in the thread's; the live line in the step's transaction, with no savepoint); its
# eighth 10, 12, 12, 18 (the caller's permissions in the token's statement). SQLite reads the
# chain's heads with queries of its own where PostgreSQL calls a function, and the caller's
# permissions in a statement of their own. Issue 28's signed receipts: decide one more, the
# previous receipt of the thread read for the chain (the receipt is written by the decision's
# own update). Issue 28's standing grants: suspend one more, the grants that might approve the
# call read before it waits (agents.grants.decide_by_grant).
BUDGETS = {
    "postgresql": {"start": 10, "suspend": 13, "decide": 13, "resume": 18},
    "sqlite": {"start": 13, "suspend": 13, "decide": 16, "resume": 18},
}


def counted(step: str, work: Any, report: dict[str, list[str]]) -> Any:
    # Each step's first commit nudges the webhook fan-out (at most once per NUDGE_DELAY), which
    # asks whether any receiver exists at most once a second: the nudge made to happen
    # in every step and the answer already known (test_statements_per_cycle_step reads it
    # first), as on a busy gateway, so counts are exact.
    fanout.nudges.due = 0.0
    with CaptureQueriesContext(connection) as queries:
        result = work()
    report[step] = [q["sql"] for q in queries.captured_queries]
    return result


@pytest.mark.django_db(transaction=True)
def test_statements_per_cycle_step(
    users: dict[str, Any], load_agents: Any, monkeypatch: pytest.MonkeyPatch, settings: Any
) -> None:
    load_agents(AGENT)
    monkeypatch.setattr(fanout._receivers_known, "ttl", 3600.0)
    fanout.forget_receivers()
    assert fanout._receivers_known() is False  # nothing to deliver to, and now known
    monkeypatch.setattr(push_fanout.devices_known, "ttl", 3600.0)
    push_fanout.devices_known.forget()
    assert push_fanout.devices_known() is False  # no device to push to, and now known
    monkeypatch.setattr(notify_outbox.anyone_known, "ttl", 3600.0)
    notify_outbox.anyone_known.forget()
    assert notify_outbox.anyone_known() is False  # nobody opted in to email, and now known
    # A process reads its receipts' signing key once a minute, not per decision (the tests'
    # servers at every signing: gateway.testenv).
    settings.RECEIPT_KEY_CACHE_SECONDS = 60
    receipt_keys.forget()
    receipt_keys.current()
    starter = Api(operator())
    reviewer = Api(users["reviewer"])
    report: dict[str, list[str]] = {}

    response = counted(
        "start", lambda: starter.post("/api/threads", {"agent": "bench", "message": "go"}), report
    )
    assert response.status_code == 201, response.content
    thread = response.json()["id"]
    assert counted("suspend", lambda: engine.advance(thread), report)
    suspension = Suspension.objects.get(thread_id=thread)
    path = f"/api/threads/{thread}/suspensions/{suspension.id}/resume"
    response = counted("decide", lambda: reviewer.post(path, {"approved": True}), report)
    assert response.status_code == 202, response.content
    assert counted("resume", lambda: engine.advance(thread), report)
    assert Thread.objects.get(pk=thread).status == Thread.Status.COMPLETED

    budget = BUDGETS[connection.vendor]
    over = {step: len(sql) for step, sql in report.items() if len(sql) > budget[step]}
    listing = "\n\n".join(
        f"{step}: {len(sql)} statements (budget {budget[step]})\n" + "\n".join(sql)
        for step, sql in report.items()
    )
    print(listing)
    assert not over, f"over budget: {over}\n\n{listing}"
