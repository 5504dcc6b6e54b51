"""The metrics page's series: requests raised per bucket, the answers' p50 and p95, the share
of closed requests that timed out, and pending per agent at each bucket's end."""

from datetime import UTC, datetime, timedelta

import pytest

from agents.models import Event
from metrics.conversations import percentile, series, summary
from tests.metrics import history

S = history.S
T0 = datetime(2026, 3, 2, 12, 0, tzinfo=UTC)
HOUR = timedelta(hours=1)


def at(minutes: float) -> datetime:
    return T0 + timedelta(minutes=minutes)


def test_a_percentile_is_a_value_that_was_seen() -> None:
    values = [5.0, 1.0, 4.0, 2.0, 3.0]
    assert percentile(values, 50) == 3.0
    assert percentile(values, 95) == 5.0
    assert percentile(values, 20) == 1.0
    assert percentile(list(range(1, 101)), 95) == 95
    assert percentile([7.5], 50) == 7.5
    assert percentile([], 50) is None


@pytest.mark.django_db
class SeriesTestCase:
    def test_each_bucket_counts_what_happened_in_it(self) -> None:
        history.suspension("payer", at(-30))  # raised before the window, still pending
        history.suspension("payer", at(10), S.APPROVED, after=60)
        history.suspension("payer", at(20), S.APPROVED, after=120)
        history.suspension("ops", at(50), S.TIMED_OUT, after=15 * 60)  # closed at 65 min
        history.suspension("ops", at(70), S.REJECTED, after=30)
        history.wait("clerk", at(100), Event.Type.INPUT_PROVIDED, after=600)  # at 110 min
        history.wait("clerk", at(170), Event.Type.THREAD_CANCELLED, after=5)
        history.suspension("payer", at(200), S.APPROVED, after=5)  # after the window

        data = series(T0, T0 + 3 * HOUR, 3, now=T0 + 4 * HOUR)

        assert data.starts == [T0, T0 + HOUR, T0 + 2 * HOUR]
        assert data.raised == [3, 2, 1]
        assert data.p50 == [60.0, 30.0, None]
        assert data.p95 == [120.0, 600.0, None]
        assert data.closed == [2, 3, 1]
        assert data.timeout_rate == [0.0, 33.3, 0.0]
        # At 13:00 payer has the one from before (the two of the first hour are decided),
        # ops the one that times out at 13:05; at 14:00 and 15:00 only payer's old one. The
        # clerk's waits were never open at a bucket's end.
        assert data.pending == {"payer": [1, 1, 1], "ops": [1, 0, 0]}

    def test_the_bucket_under_way_counts_pending_now(self) -> None:
        history.suspension("payer", at(10), S.APPROVED, after=40 * 60)  # decided at 50 min
        data = series(T0, T0 + HOUR, 2, now=at(20))
        assert data.pending == {"payer": [1, 1]}

    def test_the_buckets_add_up_to_the_summary(self) -> None:
        now = T0 + 24 * HOUR
        history.day(now)
        data = series(now - 24 * HOUR, now, 24, now=now)
        figures = summary(now - 24 * HOUR, now)
        assert sum(data.raised) == figures["input_requests_total"]
        pending_now = sum(levels[-1] for levels in data.pending.values())
        assert pending_now == figures["pending"]
