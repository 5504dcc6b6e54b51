"""POST /api/requests and GET /api/requests/{id}: an outside agent's request is a suspension
like any other (inbox, policy, deadline, audit), raised once per idempotency key, read back by
its asker with the decision, and never decided by the token that raised it."""

import json
import threading
from datetime import timedelta
from typing import Any

import pytest
from django.db import connection
from django.test import Client
from django.utils import timezone

from access.models import ApiToken
from agents import deadlines
from agents.chain import verify
from agents.models import Event, Suspension, Thread

SCHEMA = {
    "type": "object",
    "properties": {"amount": {"type": "number", "maximum": 1000}, "to": {"type": "string"}},
    "required": ["amount", "to"],
}


class Caller:
    def __init__(self, user: Any, *scopes: str) -> None:
        _, raw = ApiToken.issue(user, "external", list(scopes) or None)
        self.headers = {"Authorization": f"Bearer {raw}"}
        self.client = Client(headers=self.headers)

    def get(self, path: str, **params: Any) -> Any:
        return self.client.get(path, params)

    def post(self, path: str, data: Any = None) -> Any:
        return self.client.post(path, json.dumps(data or {}), content_type="application/json")


def ask(**over: Any) -> dict[str, Any]:
    return {
        "agent": "billing-bot",
        "run_id": "run-1",
        "tool": "pay",
        "arguments": {"amount": 120, "to": "ACME"},
        "schema": SCHEMA,
        "prompt": "Pay ACME's invoice?",
        "timeout": 600,
        "idempotency_key": "pay-acme-1",
        **over,
    }


class RequestsApiTestCase:
    @pytest.fixture(autouse=True)
    def setup(self, users: dict[str, Any]) -> None:
        self.users = users
        self.agent = Caller(users["operator"], "runs")
        self.reviewer = Caller(users["reviewer"], "decide")

    def decide(self, body: dict[str, Any], decision: dict[str, Any]) -> Any:
        path = f"/api/threads/{body['thread']}/suspensions/{body['id']}/resume"
        return self.reviewer.post(path, decision)

    def test_it_raises_a_request_that_waits_in_the_inbox(self) -> None:
        r = self.agent.post("/api/requests", ask())
        assert r.status_code == 201, r.content
        body = r.json()
        assert body["status"] == "pending" and body["approved"] is None
        assert body["run_id"] == "run-1" and body["idempotency_key"] == "pay-acme-1"
        assert body["input"] == {"amount": 120, "to": "ACME"} and body["schema"] == SCHEMA
        pending = self.reviewer.get("/api/suspensions", status="pending").json()["results"]
        assert [s["id"] for s in pending] == [body["id"]]
        assert pending[0]["you"]["may_decide"] is True
        thread = Thread.objects.get(pk=body["thread"])
        assert thread.external_run_id == "run-1" and thread.created_by == self.users["operator"]
        suspended = Event.objects.get(type=Event.Type.AGENT_SUSPENDED, suspension_id=body["id"])
        assert suspended.actor_name == "olivia"
        assert suspended.payload["external_run_id"] == "run-1"
        # A second request of the same run joins its thread.
        r = self.agent.post("/api/requests", ask(idempotency_key="pay-acme-2"))
        assert r.status_code == 201 and r.json()["thread"] == body["thread"]

    def test_the_card_shows_what_the_agent_says_of_its_tool(self) -> None:
        r = self.agent.post(
            "/api/requests",
            ask(
                description="Pays an invoice from the main account.",
                summary="Pay {amount} to {to}",
                reject_reasons=["Wrong payee", "Already paid"],
            ),
        )
        assert r.status_code == 201, r.content
        shown = r.json()["presentation"]
        assert shown["description"] == "Pays an invoice from the main account."
        assert shown["summary"] == "Pay 120 to ACME"  # filled in from the arguments
        assert shown["reject_reasons"] == ["Wrong payee", "Already paid"]
        assert shown["approve_does"] == "The agent runs pay with these arguments."
        r = self.agent.post("/api/requests", ask(idempotency_key="k2", summary="Pay {payee}"))
        assert r.status_code == 400 and "summary" in r.json()["fields"]

    def test_the_same_key_twice_makes_one_request(self) -> None:
        first = self.agent.post("/api/requests", ask())
        again = self.agent.post("/api/requests", ask())
        assert (first.status_code, again.status_code) == (201, 200)
        assert again.json()["id"] == first.json()["id"]
        assert Suspension.objects.count() == 1
        assert Event.objects.filter(type=Event.Type.AGENT_SUSPENDED).count() == 1
        other = self.agent.post("/api/requests", ask(arguments={"amount": 999, "to": "ACME"}))
        assert other.status_code == 409, other.content
        assert other.json()["error"] == "idempotency_key_reused"

    def test_the_asker_reads_an_edited_approval_once_it_is_decided(self) -> None:
        body = self.agent.post("/api/requests", ask()).json()
        edited = {"amount": 100, "to": "ACME"}
        r = self.decide(body, {"approved": True, "modifiedArgs": edited, "reason": "cap it"})
        assert r.status_code == 202, r.content
        read = self.agent.get(f"/api/requests/{body['id']}")
        assert read.status_code == 200
        got = read.json()
        assert (got["status"], got["approved"], got["arguments"]) == ("approved", True, edited)
        assert got["decided_by"] == "alice" and got["reason"] == "cap it"
        # The asker's first read is recorded as the agent going on; a second read is not.
        self.agent.get(f"/api/requests/{body['id']}")
        resumed = Event.objects.filter(type=Event.Type.AGENT_RESUMED, suspension_id=body["id"])
        assert [e.actor_name for e in resumed] == ["olivia"]
        # Nothing for a worker: the thread is the outside agent's, still running there.
        assert Thread.objects.get(pk=body["thread"]).status == Thread.Status.RUNNING
        assert verify().breaks == []

    def test_a_rejection_gives_no_arguments(self) -> None:
        body = self.agent.post("/api/requests", ask()).json()
        assert self.decide(body, {"approved": False, "reason": "not today"}).status_code == 202
        got = self.agent.get(f"/api/requests/{body['id']}").json()
        assert (got["status"], got["approved"], got["arguments"]) == ("rejected", False, None)
        assert got["reason"] == "not today"

    def test_a_question_gets_the_reviewers_answer(self) -> None:
        body = self.agent.post(
            "/api/requests",
            {
                "agent": "billing-bot",
                "run_id": "run-1",
                "kind": "input",
                "prompt": "Which account pays?",
                "idempotency_key": "q1",
            },
        ).json()
        assert body["kind"] == "input" and body["tool"] == "ask_human"
        assert self.decide(body, {"response": "The EU account"}).status_code == 202
        got = self.agent.get(f"/api/requests/{body['id']}").json()
        assert (got["status"], got["response"]) == ("approved", "The EU account")

    @pytest.mark.parametrize(("on_timeout", "approved"), [("reject", False), ("approve", True)])
    def test_the_deadline_applies_the_default_action(self, on_timeout: str, approved: bool) -> None:
        body = self.agent.post("/api/requests", ask(timeout=5, on_timeout=on_timeout)).json()
        assert deadlines.expire_overdue(now=timezone.now() + timedelta(seconds=6)) == 1
        got = self.agent.get(f"/api/requests/{body['id']}").json()
        assert (got["status"], got["approved"]) == ("timed_out", approved)
        assert got["arguments"] == (body["input"] if approved else None)

    def test_the_runs_scope_never_decides(self) -> None:
        body = self.agent.post("/api/requests", ask()).json()
        r = self.agent.post(
            f"/api/threads/{body['thread']}/suspensions/{body['id']}/resume", {"approved": True}
        )
        assert r.status_code == 403 and r.json()["scope"] == "decide"
        # Nor does a reviewer's runs token raise-and-decide its own request (four eyes).
        reviewer_agent = Caller(self.users["reviewer"])
        mine = reviewer_agent.post("/api/requests", ask(run_id="run-2")).json()
        r = reviewer_agent.post(
            f"/api/threads/{mine['thread']}/suspensions/{mine['id']}/resume", {"approved": True}
        )
        assert r.status_code == 403 and r.json()["error"] == "forbidden_by_policy", r.content

    def test_a_runs_token_reads_only_its_own_requests(self) -> None:
        body = self.agent.post("/api/requests", ask()).json()
        stranger = Caller(self.users["teammate"], "runs")
        r = stranger.get(f"/api/requests/{body['id']}")
        assert r.status_code == 403 and r.json()["scope"] == "read"
        assert self.reviewer.get(f"/api/requests/{body['id']}").status_code == 200
        outsider = Caller(self.users["outsider"])
        assert outsider.post("/api/requests", ask()).status_code == 403
        assert Client().get(f"/api/requests/{body['id']}").status_code == 401
        assert self.agent.get("/api/requests/not-a-uuid").status_code == 404

    def test_the_named_policy_applies(self, load_agents: Any) -> None:
        load_agents(
            """
agents:
  - name: payments-policy
    model: scripted
    script: [{text: Nothing to do.}]
    policy:
      auto_reject: [{arg: amount, op: ">", value: 500}]
"""
        )
        big = ask(arguments={"amount": 900, "to": "ACME"}, policy="payments-policy")
        body = self.agent.post("/api/requests", big).json()
        assert (body["status"], body["approved"]) == ("rejected", False)
        assert body["decided_by"] == "policy"
        small = ask(idempotency_key="small", policy="payments-policy")
        assert self.agent.post("/api/requests", small).json()["status"] == "pending"
        r = self.agent.post("/api/requests", ask(idempotency_key="x", policy="nope"))
        assert r.status_code == 400 and "policy" in r.json()["fields"]

    def test_a_cancelled_run_takes_no_more_requests(self) -> None:
        body = self.agent.post("/api/requests", ask()).json()
        r = self.reviewer.post(f"/api/threads/{body['thread']}/cancel")
        assert r.status_code == 200, r.content
        assert self.agent.get(f"/api/requests/{body['id']}").json()["status"] == "cancelled"
        r = self.agent.post("/api/requests", ask(idempotency_key="after"))
        assert r.status_code == 409 and r.json()["error"] == "run_ended"

    @pytest.mark.parametrize(
        ("change", "field"),
        [
            ({"run_id": ""}, "run_id"),
            ({"agent": "has space"}, "agent"),
            ({"schema": {"type": "wat"}}, "schema"),
            ({"schema": {"$ref": "#/nowhere"}}, "schema"),
            ({"schema": {"properties": {"to": {"type": "string", "pattern": "("}}}}, "schema"),
            ({"arguments": {"amount": 5000, "to": "ACME"}}, "arguments"),
            ({"timeout": 0}, "timeout"),
            ({"on_timeout": "maybe"}, "on_timeout"),
            ({"idempotency_key": None}, "idempotency_key"),
            ({"colour": "red"}, "colour"),
        ],
    )
    def test_bad_input_names_the_field(self, change: dict[str, Any], field: str) -> None:
        r = self.agent.post("/api/requests", {**ask(), **change})
        assert r.status_code == 400, r.content
        assert field in r.json()["fields"], r.json()
        assert not Suspension.objects.exists()


@pytest.mark.django_db(transaction=True)
def test_the_same_key_at_once_makes_one_request(users: dict[str, Any]) -> None:
    """Eight raises of one key at the same moment, each on its own connection."""
    callers = [Caller(users["operator"], "runs") for _ in range(8)]
    start = threading.Barrier(len(callers))
    codes: list[int] = []

    def raise_it(caller: Caller) -> None:
        try:
            start.wait()
            codes.append(caller.post("/api/requests", ask()).status_code)
        finally:
            connection.close()

    workers = [threading.Thread(target=raise_it, args=(c,)) for c in callers]
    for w in workers:
        w.start()
    for w in workers:
        w.join()
    assert sorted(codes) == [200] * 7 + [201]
    assert Suspension.objects.count() == 1
    assert Thread.objects.filter(external_run_id="run-1").count() == 1
