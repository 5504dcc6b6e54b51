"""Each reviewer's decisions measured (issue 41): approve rate, and how long they looked, from
the moment their page had the card on screen (the presence socket's "view") to the decision,
so an approval within 2 s is counted, not guessed."""

import json
import re
import uuid
from datetime import datetime, timedelta
from typing import Any

import pytest
import time_machine
from django.test import Client
from django.utils import timezone

from access.models import ApiToken
from presence import actions
from presence.models import CardView


class Caller:
    def __init__(self, user: Any, *scopes: str) -> None:
        _, raw = ApiToken.issue(user, "looks", list(scopes) or None)
        self.client = Client(headers={"Authorization": f"Bearer {raw}"})

    def get(self, path: str) -> Any:
        return self.client.get(path)

    def post(self, path: str, data: Any) -> Any:
        return self.client.post(path, json.dumps(data), content_type="application/json")


@pytest.mark.django_db
class ReviewersTestCase:
    @pytest.fixture(autouse=True)
    def setup(self, users: dict[str, Any], client: Any) -> None:
        self.users = users
        self.client = client
        self.agent = Caller(users["operator"], "runs")
        self.reviewer = Caller(users["reviewer"], "decide")
        self.socket = actions.Reviewer(uuid.uuid4(), uuid.uuid4(), users["reviewer"].pk, "alice")

    def request(self, key: str) -> dict[str, Any]:
        body = {
            "agent": "billing-bot",
            "run_id": f"run-{key}",
            "tool": "pay",
            "arguments": {"amount": 120, "to": "ACME"},
            "timeout": 3600,
            "idempotency_key": key,
        }
        r = self.agent.post("/api/requests", body)
        assert r.status_code == 201, r.content
        return r.json()

    def shown(self, body: dict[str, Any], at: datetime) -> None:
        """The reviewer's page tells the socket the card is on screen, at `at`."""
        with time_machine.travel(at, tick=False):
            actions.look(self.socket, [uuid.UUID(body["id"])])

    def decide(self, body: dict[str, Any], approved: bool, at: datetime) -> None:
        path = f"/api/threads/{body['thread']}/suspensions/{body['id']}/resume"
        with time_machine.travel(at, tick=False):
            r = self.reviewer.post(path, {"approved": approved, "reason": "" if approved else "no"})
        assert r.status_code == 202, r.content

    def test_an_approval_within_two_seconds_of_the_card_is_counted(self) -> None:
        start = timezone.now() - timedelta(minutes=10)
        quick, slow, unseen = self.request("quick"), self.request("slow"), self.request("unseen")
        self.shown(quick, start)
        self.shown(slow, start)
        # A second look (another page, a reload) does not move the first.
        self.shown(quick, start + timedelta(seconds=1))
        assert CardView.objects.count() == 2
        self.decide(quick, True, start + timedelta(seconds=1.5))
        self.decide(slow, True, start + timedelta(seconds=40))
        self.decide(unseen, False, start + timedelta(seconds=50))  # decided with no card shown
        staff = Caller(self.users["admin"], "admin")

        found = staff.get("/api/metrics/tiers?window=24h").json()["reviewers"]

        assert found == [
            {
                "reviewer": "alice",
                "decisions": 3,
                "approved": 2,
                "approve_rate": 66.7,
                "with_look": 2,
                "median_look_seconds": 20.75,
                "approved_within_2s": 1,
            }
        ]
        self.client.force_login(self.users["admin"])
        page = self.client.get("/insights/").content.decode()
        row = re.search(r'<tr data-reviewer="alice">(.*?)</tr>', page)
        assert row, page
        cells = re.findall(r"<td[^>]*>(.*?)</td>", row[1])
        assert cells == ["3", "66.7 %", '20.8 s <span class="of">(2)</span>', "1"]
        assert 'class="quick flagged">1<' in row[1]

    def test_a_rejection_within_two_seconds_is_not_a_quick_approval(self) -> None:
        start = timezone.now() - timedelta(minutes=10)
        body = self.request("no")
        self.shown(body, start)
        self.decide(body, False, start + timedelta(seconds=1))
        staff = Caller(self.users["admin"], "admin")

        (alice,) = staff.get("/api/metrics/tiers?window=24h").json()["reviewers"]

        assert (alice["decisions"], alice["approve_rate"]) == (1, 0.0)
        assert (alice["median_look_seconds"], alice["approved_within_2s"]) == (1.0, 0)
