"""/metrics: off without METRICS_TOKEN, refused without it, and every figure read from the
rows, whichever process wrote them (requests, decisions, timeouts, pending, response times,
task latency, the runnable queue, webhook deliveries)."""

from datetime import timedelta
from typing import Any

import pytest
from django.utils import timezone
from prometheus_client.openmetrics.parser import (
    text_string_to_metric_families as openmetrics_families,
)

from agents.models import Event, Thread
from metrics.collector import RESPONSE_BUCKETS, RESUME_BUCKETS
from tests.metrics import history
from tests.metrics.scrape import TOKEN, labels, scrape
from webhooks.models import Attempt, Delivery, Subscription

S = history.S


def buckets(values: list[float], bounds: tuple[float, ...], **pairs: str) -> dict[tuple, float]:
    counts = {labels(**pairs, le=str(float(b))): sum(v <= b for v in values) for b in bounds}
    counts[labels(**pairs, le="+Inf")] = len(values)
    return counts


@pytest.mark.django_db
class MetricsEndpointTestCase:
    @pytest.fixture(autouse=True)
    def setup(self, settings: Any, client: Any, users: dict[str, Any]) -> None:
        settings.METRICS_TOKEN = TOKEN
        self.settings = settings
        self.client = client
        self.users = users

    def test_it_is_not_there_while_no_token_is_set(self) -> None:
        self.settings.METRICS_TOKEN = ""
        r = self.client.get("/metrics", headers={"Authorization": "Bearer "})
        assert r.status_code == 404

    @pytest.mark.parametrize(
        "header", [None, "Bearer wrong-token", f"Basic {TOKEN}", f"Bearer {TOKEN}x", "Bearer"]
    )
    def test_it_asks_for_the_token(self, header: str | None) -> None:
        headers = {"Authorization": header} if header else {}
        r = self.client.get("/metrics", headers=headers)
        assert r.status_code == 401
        assert r["WWW-Authenticate"] == 'Bearer realm="metrics"'
        assert b"gateway_" not in r.content

    def test_a_staff_session_is_not_the_token(self) -> None:
        self.client.force_login(self.users["admin"])
        assert self.client.get("/metrics").status_code == 401

    def test_it_only_reads(self) -> None:
        r = self.client.post("/metrics", headers={"Authorization": f"Bearer {TOKEN}"})
        assert r.status_code == 405

    def test_the_figures_are_those_of_the_rows(self) -> None:
        now = timezone.now()
        past = now - timedelta(hours=1)
        history.suspension("payer", past, S.APPROVED, after=3, resumed_after=0.04)
        history.suspension("payer", past, S.REJECTED, after=400, resumed_after=2)
        history.suspension("payer", past, S.TIMED_OUT, after=600, resumed_after=0.2)
        history.suspension("payer", past, S.CANCELLED, after=20)
        history.suspension("payer", past)
        history.suspension("ops", past, S.APPROVED, after=70, tool="ask_user", kind="input")
        history.suspension("ops", past, tool="ask_user", kind="input")
        history.wait("clerk", past, Event.Type.INPUT_PROVIDED, after=12.5)
        history.wait("clerk", past, Event.Type.INPUT_TIMEOUT, after=300)
        history.wait("clerk", past, Event.Type.THREAD_CANCELLED, after=5)
        history.wait("clerk", past)
        # A thread no worker holds, runnable for 30 s, and one a worker holds.
        queued = history.suspension("payer", past).thread
        Thread.objects.filter(pk=queued.pk).update(
            status="running", runnable_since=now - timedelta(seconds=30)
        )
        held = history.suspension("payer", past).thread
        Thread.objects.filter(pk=held.pk).update(
            status="running", runnable_since=now, lease_expires_at=now + timedelta(seconds=9)
        )

        m = scrape(self.client)

        assert m["gateway_requests_total"] == {
            labels(agent="payer", tool="transfer_funds", kind="confirmation"): 7,
            labels(agent="ops", tool="ask_user", kind="input"): 2,
            labels(agent="clerk", tool="", kind="message"): 4,
        }
        assert m["gateway_decisions_total"] == {
            labels(agent="payer", kind="confirmation", outcome="approved"): 1,
            labels(agent="payer", kind="confirmation", outcome="rejected"): 1,
            labels(agent="payer", kind="confirmation", outcome="responded"): 0,
            labels(agent="payer", kind="confirmation", outcome="timed_out"): 1,
            labels(agent="payer", kind="confirmation", outcome="cancelled"): 1,
            labels(agent="ops", kind="input", outcome="approved"): 1,
            labels(agent="ops", kind="input", outcome="rejected"): 0,
            labels(agent="ops", kind="input", outcome="responded"): 0,
            labels(agent="ops", kind="input", outcome="timed_out"): 0,
            labels(agent="ops", kind="input", outcome="cancelled"): 0,
        }
        assert m["gateway_timeouts_total"] == {
            labels(agent="payer", kind="confirmation"): 1,
            labels(agent="clerk", kind="message"): 1,
        }
        assert m["gateway_pending_requests"] == {
            labels(agent="payer", kind="confirmation"): 3,
            labels(agent="ops", kind="input"): 1,
            labels(agent="clerk", kind="message"): 1,
        }

        response = m["gateway_response_time_seconds_bucket"]
        assert response == {
            **buckets([3, 400], RESPONSE_BUCKETS, kind="confirmation"),
            **buckets([70], RESPONSE_BUCKETS, kind="input"),
            **buckets([12.5], RESPONSE_BUCKETS, kind="message"),
        }
        assert m["gateway_response_time_seconds_sum"] == {
            labels(kind="confirmation"): pytest.approx(403),
            labels(kind="input"): pytest.approx(70),
            labels(kind="message"): pytest.approx(12.5),
        }
        assert m["gateway_resume_latency_seconds_bucket"] == buckets([0.04, 2, 0.2], RESUME_BUCKETS)
        assert m["gateway_resume_latency_seconds_sum"][()] == pytest.approx(2.24)

        assert m["gateway_runnable_waiting"] == {
            labels(what="thread"): 1,
            labels(what="instance"): 0,
        }
        oldest = m["gateway_runnable_oldest_seconds"][labels(what="thread")]
        assert 30 <= oldest < 40

    def test_webhook_deliveries_are_counted_by_result(self) -> None:
        thread = history.suspension("payer", timezone.now()).thread
        event = Event.objects.create(thread=thread, type="THREAD_STARTED")
        hook = Subscription.objects.create(url="https://hooks.example.com/in")
        now = timezone.now()
        statuses = {"ok": "succeeded", "dead": "failed", "retrying": "pending"}
        deliveries = {
            name: Delivery.objects.create(
                event=event if name == "ok" else Event.objects.create(thread=thread, type="X"),
                subscription=hook,
                webhook_id=f"msg_{name}",
                status=status,
            )
            for name, status in statuses.items()
        }
        for delivery, number, succeeded, code in [
            (deliveries["retrying"], 1, False, 500),
            (deliveries["retrying"], 2, False, None),
            (deliveries["ok"], 1, False, 503),
            (deliveries["ok"], 2, True, 204),
            (deliveries["dead"], 1, False, None),
        ]:
            Attempt.objects.create(
                delivery=delivery,
                number=number,
                started_at=now,
                succeeded=succeeded,
                status_code=code,
            )

        m = scrape(self.client)

        assert m["gateway_webhook_attempts_total"] == {
            labels(result="succeeded"): 1,
            labels(result="http_error"): 2,
            labels(result="error"): 2,
        }
        assert m["gateway_webhook_deliveries"] == {
            labels(status="pending"): 1,
            labels(status="succeeded"): 1,
            labels(status="failed"): 1,
        }

    def test_a_scrape_costs_the_same_queries_however_many_rows(
        self, django_assert_max_num_queries: Any
    ) -> None:
        from django.db import connection
        from django.test.utils import CaptureQueriesContext

        with CaptureQueriesContext(connection) as empty:
            scrape(self.client)
        for agent in ("a", "b", "c"):
            for status in (S.APPROVED, S.REJECTED, S.PENDING):
                history.suspension(agent, timezone.now(), status, after=1, resumed_after=0.1)
            history.wait(agent, timezone.now(), Event.Type.INPUT_PROVIDED, after=2)
        with django_assert_max_num_queries(len(empty.captured_queries)):
            scrape(self.client)

    def test_it_speaks_openmetrics_when_asked(self) -> None:
        history.suspension("payer", timezone.now(), S.APPROVED, after=2)
        r = self.client.get(
            "/metrics",
            headers={
                "Authorization": f"Bearer {TOKEN}",
                "Accept": "application/openmetrics-text; version=1.0.0",
            },
        )
        assert r.status_code == 200
        assert r["Content-Type"].startswith("application/openmetrics-text")
        families = {f.name: f for f in openmetrics_families(r.content.decode())}
        assert families["gateway_requests"].type == "counter"
        assert families["gateway_response_time_seconds"].type == "histogram"
