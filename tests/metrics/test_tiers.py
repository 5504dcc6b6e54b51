"""The tiers of review measured (issue 41): what each tier decided and the share that reached a
person, from rows made by each path (a rule, a person, the deadline), the same on /insights/,
in /metrics and from /api/metrics/tiers; a shadow model's confusion table against people."""

import json
import re
from datetime import timedelta
from typing import Any

import pytest
import time_machine
from django.test import Client
from django.utils import timezone

from access.models import ApiToken
from agents import deadlines
from agents.models import Suspension
from tests.metrics import history
from tests.metrics.scrape import TOKEN, labels, scrape

S = Suspension.Status
POLICY = """
agents:
  - name: payments-policy
    model: scripted
    script: [{text: Nothing to do.}]
    policy:
      auto_reject: [{arg: amount, op: ">", value: 500}]
  - name: two-eyes
    model: scripted
    script: [{text: Nothing to do.}]
    policy:
      quorum: 2
"""


class Caller:
    def __init__(self, user: Any, *scopes: str) -> None:
        _, raw = ApiToken.issue(user, "tiers", list(scopes) or None)
        self.client = Client(headers={"Authorization": f"Bearer {raw}"})

    def get(self, path: str) -> Any:
        return self.client.get(path)

    def post(self, path: str, data: Any) -> Any:
        return self.client.post(path, json.dumps(data), content_type="application/json")


def ask(key: str, amount: int = 120, **over: Any) -> dict[str, Any]:
    return {
        "agent": "billing-bot",
        "run_id": f"run-{key}",
        "tool": "pay",
        "arguments": {"amount": amount, "to": "ACME"},
        "prompt": "Pay ACME's invoice?",
        "timeout": 600,
        "idempotency_key": key,
        "policy": "payments-policy",
        **over,
    }


def shadow(agent: str, tool: str, said: str, status: str) -> None:
    """A confirmation a person decided after a shadow review recommended `said`."""
    made = history.suspension(agent, timezone.now() - timedelta(minutes=5), status, 60, tool=tool)
    assert made.suspension is not None
    Suspension.objects.filter(pk=made.suspension.pk).update(
        tier="person",
        review={"model": "scripted", "mode": "shadow", "recommendation": said, "reason": "r"},
    )


@pytest.mark.django_db
class TiersTestCase:
    @pytest.fixture(autouse=True)
    def setup(self, users: dict[str, Any], client: Any, settings: Any, load_agents: Any) -> None:
        load_agents(POLICY)
        settings.METRICS_TOKEN = TOKEN
        self.users = users
        self.client = client
        self.agent = Caller(users["operator"], "runs")
        self.reviewer = Caller(users["reviewer"], "decide")

    def raise_request(self, key: str, **over: Any) -> dict[str, Any]:
        r = self.agent.post("/api/requests", ask(key, **over))
        assert r.status_code in (200, 201), r.content
        return r.json()

    def decide(self, body: dict[str, Any], approved: bool) -> None:
        path = f"/api/threads/{body['thread']}/suspensions/{body['id']}/resume"
        r = self.reviewer.post(path, {"approved": approved, "reason": "" if approved else "no"})
        assert r.status_code == 202, r.content

    def one_of_each_path(self) -> None:
        """A rule's rejection, a person's approval and rejection, and a deadline."""
        ruled = self.raise_request("big", amount=900)
        assert ruled["status"] == "rejected"
        self.decide(self.raise_request("yes"), True)
        self.decide(self.raise_request("no"), False)
        with time_machine.travel(timezone.now() - timedelta(hours=1), tick=False):
            self.raise_request("late", timeout=5)
        assert deadlines.expire_overdue() == 1

    def test_each_path_keeps_its_tier_on_the_row(self) -> None:
        self.one_of_each_path()
        tiers = dict(Suspension.objects.values_list("tool_input__amount", "tier").order_by())
        by_status = sorted(Suspension.objects.values_list("status", "tier"))
        assert by_status == [
            ("approved", "person"),
            ("rejected", "person"),
            ("rejected", "rule"),
            ("timed_out", "deadline"),
        ]
        assert tiers[900] == "rule"

    def test_the_api_counts_each_tier_and_the_share_that_reached_a_person(self) -> None:
        self.one_of_each_path()
        staff = Caller(self.users["admin"], "admin")

        r = staff.get("/api/metrics/tiers?window=24h")

        assert r.status_code == 200, r.content
        found = r.json()
        expected = {"rule": 1, "grant": 0, "history": 0, "model": 0, "person": 2, "deadline": 1}
        assert found["tiers"] == list(expected)
        assert found["all"] == {
            "decided": expected,
            "total": 4,
            "reached_person": 3,
            "person_share": 75.0,
        }
        assert found["agents"] == [{"agent": "billing-bot", **found["all"]}]
        # A window that holds none of them counts none.
        with time_machine.travel(timezone.now() + timedelta(hours=1)):
            assert staff.get("/api/metrics/tiers?window=30m").json()["all"]["total"] == 0

    def test_the_vote_that_completes_a_quorum_is_a_persons_decision(self) -> None:
        body = self.raise_request("quorum", policy="two-eyes")
        self.decide(body, True)
        assert Suspension.objects.get(pk=body["id"]).tier == ""  # one vote: still pending
        teammate = Caller(self.users["teammate"], "decide")
        path = f"/api/threads/{body['thread']}/suspensions/{body['id']}/resume"
        assert teammate.post(path, {"approved": True}).status_code == 202
        s = Suspension.objects.get(pk=body["id"])
        assert (s.status, s.tier) == ("approved", "person")

        found = Caller(self.users["admin"], "admin").get("/api/metrics/tiers").json()

        assert found["all"]["decided"]["person"] == 1
        # Both reviewers decided it: each vote is one of their decisions.
        assert {r["reviewer"]: r["decisions"] for r in found["reviewers"]} == {
            "alice": 1,
            "bob": 1,
        }

    def test_the_api_is_for_staff_or_the_metrics_token(self) -> None:
        assert self.reviewer.get("/api/metrics/tiers").status_code == 403
        assert Client().get("/api/metrics/tiers").status_code == 401
        token = Client(headers={"Authorization": f"Bearer {TOKEN}"})
        assert token.get("/api/metrics/tiers").status_code == 200
        bad = Caller(self.users["admin"], "admin").get("/api/metrics/tiers?window=40d")
        assert bad.status_code == 400 and "window" in bad.json()["fields"]

    def test_prometheus_counts_each_tier(self) -> None:
        self.one_of_each_path()

        samples = scrape(self.client)["gateway_decisions_by_tier_total"]

        assert samples == {
            labels(agent="billing-bot", tier="rule"): 1,
            labels(agent="billing-bot", tier="person"): 2,
            labels(agent="billing-bot", tier="deadline"): 1,
        }

    def test_the_page_shows_who_decided_per_agent(self) -> None:
        self.one_of_each_path()
        self.client.force_login(self.users["admin"])

        page = self.client.get("/insights/").content.decode()

        row = re.search(r'<tr data-agent="billing-bot">(.*?)</tr>', page)
        assert row, page
        cells = re.findall(r"<td[^>]*>(.*?)</td>", row[1])
        assert cells[:7] == ["1", "0", "0", "0", "2", "1", "4"]
        assert cells[7] == '75 % <span class="of">(3)</span>'
        assert '<tr class="all"><th scope="row">All agents</th><td>1</td>' in page

    def test_a_shadow_model_is_compared_with_people(self) -> None:
        for said, status, n in [
            ("approve", S.APPROVED, 3),
            ("approve", S.REJECTED, 1),
            ("reject", S.REJECTED, 2),
            ("escalate", S.APPROVED, 1),
        ]:
            for _ in range(n):
                shadow("payments", "transfer_funds", said, status)
        shadow("payments", "refund", "reject", S.APPROVED)
        # A model that decided (not shadow) is not in the table.
        made = history.suspension("payments", timezone.now(), S.APPROVED, 1)
        assert made.suspension is not None
        Suspension.objects.filter(pk=made.suspension.pk).update(
            tier="model", review={"mode": "decide", "recommendation": "approve"}
        )
        staff = Caller(self.users["admin"], "admin")

        found = staff.get("/api/metrics/tiers?window=24h").json()["shadow"]

        refund, transfer = found
        assert (transfer["agent"], transfer["tool"]) == ("payments", "transfer_funds")
        assert transfer["counts"] == {
            "approve": {"approved": 3, "rejected": 1},
            "reject": {"approved": 0, "rejected": 2},
            "escalate": {"approved": 1, "rejected": 0},
        }
        assert (transfer["compared"], transfer["agreed"], transfer["agreement"]) == (6, 5, 83.3)
        assert transfer["approvals_people_rejected"] == 1
        assert refund["tool"] == "refund" and refund["agreement"] == 0.0
        shadowed = scrape(self.client)["gateway_shadow_reviews_total"]
        pair = {"agent": "payments", "tool": "transfer_funds"}
        assert shadowed[labels(**pair, recommendation="approve", decision="approved")] == 3
        assert shadowed[labels(**pair, recommendation="approve", decision="rejected")] == 1
        assert sum(shadowed.values()) == 8  # the decide-mode model's row is not there

        self.client.force_login(self.users["admin"])
        page = self.client.get("/insights/").content.decode()
        table = re.search(
            r'<table class="confusion" data-agent="payments" data-tool="transfer_funds">'
            r"(.*?)</table>",
            page,
            re.S,
        )
        assert table, page
        assert "83.3 % agreement" in table[1]
        approve = re.search(r'<tr data-said="approve">(.*?)</tr>', table[1])
        assert approve and re.findall(r"<td[^>]*>(\d+)</td>", approve[1]) == ["3", "1"]
        assert 'class="disagree flagged">1<' in approve[1]

    def test_the_openapi_document_describes_it(self) -> None:
        document = Caller(self.users["reviewer"], "read").get("/api/openapi.json").json()
        operation = document["paths"]["/api/metrics/tiers"]["get"]
        assert "window" in {p["name"] for p in operation["parameters"]}
        answer = operation["responses"]["200"]["content"]["application/json"]["schema"]
        assert answer == {"$ref": "#/components/schemas/Tiers"}
