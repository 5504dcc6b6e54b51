"""The four conversation figures of docs/metrics.md over a window, and the same requests as
series over time for the metrics page."""

import bisect
import math
import re
from collections import Counter, defaultdict
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

from metrics.requests import Request, open_during, tally_raised_between

UNITS = {"s": 1, "m": 60, "h": 3600, "d": 86400}
MAX_WINDOW = timedelta(days=31)


def parse_window(text: str) -> timedelta:
    """ "90s", "15m", "24h", "7d": a window of up to 31 days. Raises ValueError."""
    match = re.fullmatch(r"([1-9][0-9]{0,6})([smhd])", text.strip())
    if not match:
        raise ValueError("Give the window as a number and a unit: 90s, 15m, 24h or 7d.")
    window = timedelta(seconds=int(match[1]) * UNITS[match[2]])
    if window > MAX_WINDOW:
        raise ValueError("The window is at most 31 days (31d).")
    return window


def _percent(part: int, whole: int) -> float | None:
    return round(100 * part / whole, 1) if whole else None


def summary(since: datetime, until: datetime) -> dict[str, Any]:
    """The requests raised in [since, until), as each stands now (metrics.requests says what a
    request and its outcome are):

    - `input_requests_total`: how many were raised;
    - `average_response_time`: the mean seconds from raised to a person's answer, over those
      answered (timeouts, cancellations and pending ones have no response time); None when
      none was answered;
    - `completion_rate`: the percentage answered by a person, of all raised;
    - `timeout_rate`: the percentage closed by their deadline or input timeout, of all raised.

    The rest of 100 % is cancelled or still pending; those counts come too, with the answered
    and timed-out counts, so every figure can be checked against the rows. Rates have one
    decimal, seconds three; both are None when nothing was raised.
    """
    tally = tally_raised_between(since, until)
    outcomes = tally.outcomes
    total = sum(outcomes.values())
    answered = outcomes["answered"]
    return {
        "since": since.isoformat(),
        "until": until.isoformat(),
        "input_requests_total": total,
        "average_response_time": (
            round(tally.answered_seconds / answered, 3) if answered else None
        ),
        "completion_rate": _percent(outcomes["answered"], total),
        "timeout_rate": _percent(outcomes["timed_out"], total),
        "answered": outcomes["answered"],
        "timed_out": outcomes["timed_out"],
        "cancelled": outcomes["cancelled"],
        "pending": outcomes["pending"],
    }


def percentile(values: list[float], p: float) -> float | None:
    """The nearest-rank percentile: the smallest value with at least p % of them at or below
    it (an actual response time, never one between two)."""
    if not values:
        return None
    ordered = sorted(values)
    return ordered[max(math.ceil(p / 100 * len(ordered)), 1) - 1]


@dataclass
class Series:
    """A window cut into equal buckets, with per bucket: requests raised, the p50 and p95 of
    the answers given in it, the share of the requests closed in it that timed out, and how
    many were pending per agent at its end (or now, for the bucket that is under way)."""

    since: datetime
    step: timedelta
    count: int
    raised: list[int] = field(default_factory=list)
    p50: list[float | None] = field(default_factory=list)
    p95: list[float | None] = field(default_factory=list)
    timeout_rate: list[float | None] = field(default_factory=list)
    closed: list[int] = field(default_factory=list)
    pending: dict[str, list[int]] = field(default_factory=dict)

    @property
    def starts(self) -> list[datetime]:
        return [self.since + i * self.step for i in range(self.count)]


def series(since: datetime, until: datetime, count: int, now: datetime) -> Series:
    """The requests open during [since, until) in `count` buckets (see Series)."""
    step = (until - since) / count
    out = Series(since=since, step=step, count=count)
    # When each bucket's pending count is read: its end, or now for the one under way.
    ends = [min(since + (i + 1) * step, now) for i in range(count)]
    raised = [0] * count
    answers: list[list[float]] = [[] for _ in range(count)]
    closed: list[Counter[str]] = [Counter() for _ in range(count)]
    # Pending per agent, as steps: +1 from the first bucket end at or after it was raised,
    # -1 from the first bucket end at or after it was closed.
    steps: dict[str, list[int]] = defaultdict(lambda: [0] * (count + 1))

    def bucket(at: datetime) -> int | None:
        i = math.floor((at - since) / step)
        return i if 0 <= i < count else None

    request: Request
    for request in open_during(since, until):
        i = bucket(request.raised_at)
        if i is not None:
            raised[i] += 1
        if request.closed_at is not None and request.outcome != "pending":
            j = bucket(request.closed_at)
            if j is not None:
                closed[j][request.outcome] += 1
                if request.response_seconds is not None:
                    answers[j].append(request.response_seconds)
        start = bisect.bisect_left(ends, request.raised_at)
        stop = bisect.bisect_left(ends, request.closed_at) if request.closed_at else count
        if start < stop:
            agent_steps = steps[request.agent]
            agent_steps[start] += 1
            agent_steps[stop] -= 1
    out.raised = raised
    out.p50 = [percentile(a, 50) for a in answers]
    out.p95 = [percentile(a, 95) for a in answers]
    out.closed = [sum(c.values()) for c in closed]
    out.timeout_rate = [_percent(c["timed_out"], sum(c.values())) for c in closed]
    for agent, agent_steps in sorted(steps.items()):
        level, levels = 0, []
        for i in range(count):
            level += agent_steps[i]
            levels.append(level)
        out.pending[agent] = levels
    return out
