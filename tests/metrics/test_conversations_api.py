"""GET /api/metrics/conversations: the seed's four figures over a window, equal to a hand count
of the rows; for staff or the metrics token."""

from datetime import timedelta
from typing import Any

import pytest
from django.utils import timezone

from agents.models import Event
from tests.conftest import Api
from tests.metrics import history
from tests.metrics.scrape import TOKEN

S = history.S
URL = "/api/metrics/conversations"


def hand_count(made: list[history.Made], since: Any, until: Any) -> dict[str, Any]:
    """The figures, counted the plain way from what was written."""
    raised = [m for m in made if since <= m.raised_at < until]
    answered = [m for m in raised if m.outcome == "answered"]
    timed_out = [m for m in raised if m.outcome == "timed_out"]
    seconds = [(m.closed_at - m.raised_at).total_seconds() for m in answered]
    return {
        "input_requests_total": len(raised),
        "average_response_time": round(sum(seconds) / len(seconds), 3),
        "completion_rate": round(100 * len(answered) / len(raised), 1),
        "timeout_rate": round(100 * len(timed_out) / len(raised), 1),
        "answered": len(answered),
        "timed_out": len(timed_out),
        "cancelled": sum(m.outcome == "cancelled" for m in raised),
        "pending": sum(m.outcome == "pending" for m in raised),
    }


@pytest.mark.django_db
class ConversationsApiTestCase:
    @pytest.fixture(autouse=True)
    def setup(self, users: dict[str, Any], settings: Any, time_machine: Any) -> None:
        settings.METRICS_TOKEN = TOKEN
        self.now = timezone.now().replace(microsecond=0)
        time_machine.move_to(self.now, tick=False)
        self.admin = Api(users["admin"])
        self.users = users

    @pytest.mark.parametrize("window", ["24h", "6h", "90m", "3600s", "2d"])
    def test_the_figures_equal_a_hand_count_of_the_rows(self, window: str) -> None:
        # A day of requests, and the day before it, which a 24 h window leaves out.
        made = history.day(self.now) + history.day(self.now - timedelta(days=1), seed=3)

        r = self.admin.get(URL, window=window)

        assert r.status_code == 200, r.content
        figures = r.json()
        span = {"24h": 24 * 3600, "6h": 6 * 3600, "90m": 5400, "3600s": 3600, "2d": 172800}
        since = self.now - timedelta(seconds=span[window])
        assert figures == {
            "window": window,
            "since": since.isoformat(),
            "until": self.now.isoformat(),
            **hand_count(made, since, self.now),
        }
        assert figures["input_requests_total"] > 0

    def test_a_request_counts_in_the_window_it_was_raised_in(self) -> None:
        raised = self.now - timedelta(minutes=90)
        history.suspension("payer", raised, S.APPROVED, after=3600)  # decided 30 min ago
        history.wait("clerk", self.now - timedelta(minutes=10), Event.Type.INPUT_TIMEOUT, after=60)
        history.suspension("payer", self.now - timedelta(minutes=5))

        hour = self.admin.get(URL, window="1h").json()
        two = self.admin.get(URL, window="2h").json()

        assert (hour["input_requests_total"], hour["timed_out"], hour["pending"]) == (2, 1, 1)
        assert hour["answered"] == 0 and hour["average_response_time"] is None
        assert (hour["completion_rate"], hour["timeout_rate"]) == (0.0, 50.0)
        assert (two["input_requests_total"], two["answered"]) == (3, 1)
        assert two["average_response_time"] == 3600.0
        assert (two["completion_rate"], two["timeout_rate"]) == (33.3, 33.3)

    def test_what_a_rule_grant_history_rule_or_model_decided_is_no_request_for_a_person(
        self,
    ) -> None:
        raised = self.now - timedelta(minutes=30)
        history.suspension("payer", raised, S.APPROVED, after=600)  # a person, in 10 min
        for tier in ("rule", "grant", "history", "model"):
            history.suspension("payer", raised, S.APPROVED, after=0.01, tier=tier)

        figures = self.admin.get(URL, window="1h").json()

        # Only the person's: the others never waited in the inbox (/api/metrics/tiers has them).
        assert (figures["input_requests_total"], figures["answered"]) == (1, 1)
        assert figures["average_response_time"] == 600.0
        tiers = self.admin.get("/api/metrics/tiers", window="1h").json()
        assert tiers["all"]["total"] == 5 and tiers["all"]["reached_person"] == 1

    def test_with_nothing_raised_the_rates_are_null(self) -> None:
        figures = self.admin.get(URL, window="1h").json()
        assert figures["input_requests_total"] == 0
        assert figures["average_response_time"] is None
        assert figures["completion_rate"] is None and figures["timeout_rate"] is None

    def test_the_window_defaults_to_a_day(self) -> None:
        figures = self.admin.get(URL).json()
        assert figures["window"] == "24h"
        assert figures["since"] == (self.now - timedelta(days=1)).isoformat()

    @pytest.mark.parametrize("window", ["0h", "24", "h", "1w", "32d", "-1h", "1.5h", ""])
    def test_it_refuses_a_window_it_cannot_read(self, window: str) -> None:
        r = self.admin.get(URL, window=window)
        assert r.status_code == 400
        assert r.json()["error"] == "invalid" and "window" in r.json()["fields"]

    @pytest.mark.parametrize(
        "who, status", [(None, 401), ("outsider", 403), ("reviewer", 403), ("admin", 200)]
    )
    def test_it_is_for_staff(self, who: str | None, status: int) -> None:
        assert Api(self.users[who] if who else None).get(URL).status_code == status

    def test_a_staff_session_may_read_it(self, client: Any) -> None:
        client.force_login(self.users["admin"])
        assert client.get(URL).status_code == 200

    def test_the_metrics_token_may_read_it(self, client: Any, settings: Any) -> None:
        bearer = {"Authorization": f"Bearer {TOKEN}"}
        assert client.get(URL, headers=bearer).status_code == 200
        assert client.get(URL, headers={"Authorization": "Bearer nope"}).status_code == 401
        settings.METRICS_TOKEN = ""
        assert client.get(URL, headers=bearer).status_code == 401
