"""/metrics after a scripted run through the API and a real Celery worker: every counter equals
a count of the run's events (approved, rejected, timed out at a 1 s deadline, a reply to a
question), and the JSON summary the same run counted by hand."""

from collections import Counter
from typing import Any

import pytest

from agents.models import Event, Suspension, Thread
from metrics.collector import RESPONSE_BUCKETS
from tests.conftest import operator_of, wait_for
from tests.metrics.scrape import TOKEN, labels, scrape

pytestmark = pytest.mark.worker

AGENTS = """
agents:
  - name: payer
    model: scripted
    tools: [transfer_funds]
    script:
      - text: Paying invoice 7.
        tool_calls:
          - {name: transfer_funds, input: {from_account: A-1, to_account: B-2, amount: 70}}
      - text: Paid.
        if_error:
          text: Not paid.
  - name: hasty
    model: scripted
    tools: [transfer_funds]
    tool_overrides:
      transfer_funds: {timeout: 1, on_timeout: reject}
    script:
      - tool_calls:
          - {name: transfer_funds, input: {from_account: A-1, to_account: B-2, amount: 5}}
      - text: Went on without it.
  - name: clerk
    model: scripted
    script:
      - text: Which form, A or B?
      - tool_calls:
          - {name: complete, input: {result: Filed.}}
  - name: desk
    model: scripted
    sub_agents: [clerk]
    script:
      - tool_calls:
          - {name: use_agent, input: {name: clerk, message: file it}}
      - text: All done.
"""


def start(api: Any, agent: str, status: str) -> str:
    r = operator_of(api).post("/api/threads", {"agent": agent, "message": "go"})
    assert r.status_code == 201, r.content
    tid = r.json()["id"]
    wait_for(
        lambda: Thread.objects.filter(pk=tid).exclude(status="running").exists(),
        what=f"{agent} to stop",
    )
    thread = Thread.objects.get(pk=tid)
    assert thread.status == status, (thread.status, thread.error)
    return tid


def pending(tid: str) -> Suspension:
    return Suspension.objects.get(thread_id=tid, status="pending")


def reply_seconds(provided: Event) -> float:
    """From a wait's INPUT_REQUIRED to the INPUT_PROVIDED that answered it."""
    asked = Event.objects.filter(
        thread_id=provided.thread_id, type="INPUT_REQUIRED", id__lt=provided.id
    ).latest("id")
    return (provided.created_at - asked.created_at).total_seconds()


def finished(*tids: str) -> None:
    wait_for(
        lambda: Thread.objects.filter(pk__in=tids, status="completed").count() == len(tids),
        timeout=20,
        what="every thread to complete",
    )


class MetricsOfARunTestCase:
    @pytest.fixture(autouse=True)
    def setup(self, worker: Any, api: Any, load_agents: Any, settings: Any) -> None:
        settings.METRICS_TOKEN = TOKEN
        load_agents(AGENTS)
        self.api = api("reviewer")
        self.admin = api("admin")

    def run(self) -> list[str]:
        approved = start(self.api, "payer", "suspended")
        rejected = start(self.api, "payer", "suspended")
        timed_out = start(self.api, "hasty", "suspended")
        replied = start(self.api, "desk", "waiting_input")
        for tid, decision in ((approved, {"approved": True}), (rejected, {"approved": False})):
            s = pending(tid)
            r = self.api.post(f"/api/threads/{tid}/suspensions/{s.pk}/resume", decision)
            assert r.status_code == 202, r.content
        r = self.api.post(f"/api/threads/{replied}/messages", {"text": "Form A."})
        assert r.status_code == 202, r.content
        tids = [approved, rejected, timed_out, replied]
        finished(*tids)
        assert Suspension.objects.get(thread_id=timed_out).status == "timed_out"
        return tids

    def test_the_counters_equal_the_events_of_the_run(self, client: Any) -> None:
        self.run()
        m = scrape(client)

        suspended = {
            e.suspension_id: e.payload for e in Event.objects.filter(type="AGENT_SUSPENDED")
        }
        raised = Counter((p["agent"], p["tool"], p["kind"]) for p in suspended.values())
        for e in Event.objects.filter(type="INPUT_REQUIRED"):
            raised[e.payload["agent"], "", "message"] += 1
        assert m["gateway_requests_total"] == {
            labels(agent=a, tool=t, kind=k): n for (a, t, k), n in raised.items()
        }
        assert raised == {
            ("payer", "transfer_funds", "confirmation"): 2,
            ("hasty", "transfer_funds", "confirmation"): 1,
            ("clerk", "", "message"): 1,
        }

        closed: Counter[tuple[str, str, str]] = Counter()
        for e in Event.objects.filter(
            type__in=["SUSPENSION_DECIDED", "SUSPENSION_TIMEOUT", "SUSPENSION_CANCELLED"]
        ):
            asked = suspended[e.suspension_id]
            outcome = (
                e.payload["status"]
                if e.type == "SUSPENSION_DECIDED"
                else {
                    "SUSPENSION_TIMEOUT": "timed_out",
                    "SUSPENSION_CANCELLED": "cancelled",
                }[e.type]
            )
            closed[asked["agent"], asked["kind"], outcome] += 1
        decisions = {k: v for k, v in m["gateway_decisions_total"].items() if v}
        assert decisions == {
            labels(agent=a, kind=k, outcome=o): n for (a, k, o), n in closed.items()
        }
        assert closed == {
            ("payer", "confirmation", "approved"): 1,
            ("payer", "confirmation", "rejected"): 1,
            ("hasty", "confirmation", "timed_out"): 1,
        }

        timeouts = Event.objects.filter(type__in=["SUSPENSION_TIMEOUT", "INPUT_TIMEOUT"]).count()
        assert sum(m["gateway_timeouts_total"].values()) == timeouts == 1
        assert m["gateway_timeouts_total"] == {labels(agent="hasty", kind="confirmation"): 1}
        assert not any(m.get("gateway_pending_requests", {}).values())

        # Response times: what a person answered, from the rows' own times.
        decided = Suspension.objects.filter(status__in=["approved", "rejected"])
        waits = [reply_seconds(e) for e in Event.objects.filter(type="INPUT_PROVIDED")]
        seconds = {
            "confirmation": [(s.decided_at - s.created_at).total_seconds() for s in decided],
            "input": [],
            "message": waits,
        }
        assert (
            Event.objects.filter(type="SUSPENSION_DECIDED").count()
            == len(seconds["confirmation"])
            == 2
        )
        for kind, values in seconds.items():
            key = labels(kind=kind)
            assert m["gateway_response_time_seconds_count"][key] == len(values)
            assert m["gateway_response_time_seconds_sum"][key] == pytest.approx(
                sum(values), abs=1e-6
            )
            for bound in RESPONSE_BUCKETS:
                le = labels(kind=kind, le=str(float(bound)))
                assert m["gateway_response_time_seconds_bucket"][le] == sum(
                    v <= bound for v in values
                )

        # Task latency: every closed suspension was handed back to its agent once.
        resumed = Event.objects.filter(type="AGENT_RESUMED").count()
        assert m["gateway_resume_latency_seconds_count"][()] == resumed == 3
        latency = sum(
            (s.resumed_at - s.decided_at).total_seconds() for s in Suspension.objects.all()
        )
        assert m["gateway_resume_latency_seconds_sum"][()] == pytest.approx(latency, abs=1e-6)

    def test_the_summary_equals_a_hand_count_of_the_run(self) -> None:
        self.run()
        r = self.admin.get("/api/metrics/conversations", window="1h")
        assert r.status_code == 200, r.content
        figures = r.json()

        approved, rejected = Suspension.objects.filter(status__in=["approved", "rejected"])
        asked = Event.objects.get(type="INPUT_REQUIRED")
        replied = Event.objects.get(type="INPUT_PROVIDED")
        answers = [
            (approved.decided_at - approved.created_at).total_seconds(),
            (rejected.decided_at - rejected.created_at).total_seconds(),
            (replied.created_at - asked.created_at).total_seconds(),
        ]
        assert figures["input_requests_total"] == 4
        assert figures["answered"] == 3 and figures["timed_out"] == 1
        assert figures["cancelled"] == 0 and figures["pending"] == 0
        assert figures["average_response_time"] == round(sum(answers) / 3, 3)
        assert figures["completion_rate"] == 75.0
        assert figures["timeout_rate"] == 25.0
