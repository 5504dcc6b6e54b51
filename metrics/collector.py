"""The Prometheus metrics, computed from the database at each scrape.

Every figure is an aggregate over rows every process writes (suspensions, the Event table,
threads, frames, webhook deliveries), so any daphne process answers a scrape with the same
numbers, whatever process made the requests, decided them or ran the agents, and a restart
loses nothing: there is no counter in any process's memory (no multiprocess mode needed).
A counter goes down only if the rows it counts are deleted (a thread deleted in the admin
takes its suspensions and events with it); Prometheus reads that as a counter reset.

On PostgreSQL the queries of one scrape share one snapshot (REPEATABLE READ, read only), so the
figures agree with each other: a request counted as decided is also counted as raised.
"""

from collections import defaultdict
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from datetime import datetime, timedelta
from typing import Any

from django.db import connection, transaction
from django.db.models import (
    Count,
    DurationField,
    ExpressionWrapper,
    F,
    Min,
    OuterRef,
    Q,
    QuerySet,
    Subquery,
    Sum,
)
from django.db.models.fields.json import KT
from django.utils import timezone
from prometheus_client.core import (
    CounterMetricFamily,
    GaugeMetricFamily,
    HistogramMetricFamily,
    Metric,
)
from prometheus_client.registry import Collector

from agents.models import Event, StackFrame, Suspension, Thread
from infra import transactions
from metrics import tiers
from metrics.requests import FOR_A_PERSON, MESSAGE, OUTCOMES, REPLY, replies, waits
from webhooks.models import Attempt, Delivery

S = Suspension.Status
E = Event.Type
KINDS = (Suspension.Kind.CONFIRMATION, Suspension.Kind.INPUT, MESSAGE)
DECISIONS = (S.APPROVED, S.REJECTED, S.RESPONDED, S.TIMED_OUT, S.CANCELLED)
# Seconds: a person answers within seconds to a day.
RESPONSE_BUCKETS = (1, 5, 15, 30, 60, 120, 300, 600, 1800, 3600, 7200, 14400, 43200, 86400)
# Seconds: a worker takes a decided request up within milliseconds, unless the queue is long.
RESUME_BUCKETS = (0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 300)


@contextmanager
def snapshot() -> Iterator[None]:
    """One consistent read of the database for a whole scrape, where the database offers it
    cheaply. SQLite reads without a transaction: the gateway's SQLite transactions take the
    write lock up front (gateway.settings), and a scrape must never hold up a writer."""
    if connection.vendor != "postgresql" or transactions.in_transaction():
        yield
        return
    with transaction.atomic():
        with connection.cursor() as cursor:
            cursor.execute("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ READ ONLY")
        yield


Histogram = tuple[list[tuple[str, int]], float]


def _histograms(
    rows: QuerySet, specs: dict[str, tuple[Any, tuple[float, ...], Q]]
) -> dict[str, Histogram]:
    """Histograms over `rows` in one query (one scan): for each name, the cumulative bucket
    counts and the sum of its duration over the rows matching its condition."""
    aggregates: dict[str, Any] = {}
    for name, (duration, buckets, where) in specs.items():
        rows = rows.annotate(
            **{f"d_{name}": ExpressionWrapper(duration, output_field=DurationField())}
        )
        aggregates[f"{name}_n"] = Count("pk", filter=where)
        aggregates[f"{name}_sum"] = Sum(f"d_{name}", filter=where)
        for i, bound in enumerate(buckets):
            within = Q(**{f"d_{name}__lte": timedelta(seconds=bound)})
            aggregates[f"{name}_le{i}"] = Count("pk", filter=where & within)
    found = rows.aggregate(**aggregates)
    out = {}
    for name, (_, buckets, _) in specs.items():
        points = [(_le(b), found[f"{name}_le{i}"]) for i, b in enumerate(buckets)]
        points.append(("+Inf", found[f"{name}_n"]))
        total = found[f"{name}_sum"]
        out[name] = (points, total.total_seconds() if total is not None else 0.0)
    return out


def _asked_before() -> QuerySet[Event]:
    """The INPUT_REQUIRED an event of a thread closed: the last one before it."""
    return (
        Event.objects.filter(
            thread_id=OuterRef("thread_id"), type=E.INPUT_REQUIRED, id__lt=OuterRef("id")
        )
        .annotate(agent=KT("payload__agent"))
        .order_by("-id")
    )


def _le(bound: float) -> str:
    return str(float(bound))


class GatewayCollector(Collector):
    """The gateway's metrics, each read from the database when collected."""

    def __init__(self, clock: Callable[[], datetime] = timezone.now) -> None:
        self.clock = clock

    def collect(self) -> Iterator[Metric]:
        with snapshot():
            families = [
                *self.requests(),
                *self.durations(),
                *self.runnable(),
                *self.webhooks(),
                *tiers.families(),
            ]
        return iter(families)

    def requests(self) -> list[Metric]:
        raised = CounterMetricFamily(
            "gateway_requests",
            "Requests raised for a person: suspensions (kind confirmation or input, by tool) "
            "and waits for a message (kind message)",
            labels=["agent", "tool", "kind"],
        )
        decisions = CounterMetricFamily(
            "gateway_decisions",
            "Suspensions closed, by outcome: approved, rejected (by a person), timed_out (the "
            "deadline), cancelled (the run was cancelled)",
            labels=["agent", "kind", "outcome"],
        )
        timeouts = CounterMetricFamily(
            "gateway_timeouts",
            "Requests closed by their deadline (suspensions) or input timeout (waits)",
            labels=["agent", "kind"],
        )
        pending = GaugeMetricFamily(
            "gateway_pending_requests",
            "Requests waiting for a person now",
            labels=["agent", "kind"],
        )
        by_request: dict[tuple[str, str, str], int] = defaultdict(int)
        by_outcome: dict[tuple[str, str], dict[str, int]] = defaultdict(dict)
        open_now: dict[tuple[str, str], int] = defaultdict(int)
        timed_out: dict[tuple[str, str], int] = defaultdict(int)
        # One pass over suspensions, grouped by everything the four metrics need.
        rows = (
            Suspension.objects.filter(FOR_A_PERSON)
            .values_list("agent_name", "tool_name", "kind", "status")
            .annotate(n=Count("pk"))
            .order_by()
        )
        for agent, tool, kind, status, n in rows:
            by_request[agent, tool, kind] += n
            if status == S.PENDING:
                open_now[agent, kind] += n
            else:
                outcomes = by_outcome[agent, kind]
                outcomes[status] = outcomes.get(status, 0) + n
            if status == S.TIMED_OUT:
                timed_out[agent, kind] += n
        # Waits for a message: every INPUT_REQUIRED is one. Only the open ones (of threads
        # waiting now) and the timed-out ones need the event that closed them: those are few,
        # where pairing every wait on each scrape would cost a lookup per wait.
        asked = Event.objects.filter(type=E.INPUT_REQUIRED).annotate(agent=KT("payload__agent"))
        for agent, n in asked.values_list("agent").annotate(n=Count("pk")).order_by():
            by_request[agent or "", "", MESSAGE] += n
        still_open = waits().filter(
            thread__status=Thread.Status.WAITING_INPUT, closed_type__isnull=True
        )
        for agent, n in still_open.values_list("agent").annotate(n=Count("pk")).order_by():
            open_now[agent or "", MESSAGE] += n
        for agent, n in (
            Event.objects.filter(type=E.INPUT_TIMEOUT)
            .annotate(agent=Subquery(_asked_before().values("agent")[:1]))
            .values_list("agent")
            .annotate(n=Count("pk"))
            .order_by()
        ):
            timed_out[agent or "", MESSAGE] += n
        for (agent, tool, kind), n in sorted(by_request.items()):
            raised.add_metric([agent, tool, kind], n)
        for (agent, kind), outcomes in sorted(by_outcome.items()):
            for outcome in DECISIONS:
                decisions.add_metric([agent, kind, outcome], outcomes.get(outcome, 0))
        for (agent, kind), n in sorted(timed_out.items()):
            timeouts.add_metric([agent, kind], n)
        for (agent, kind), n in sorted(open_now.items()):
            pending.add_metric([agent, kind], n)
        return [raised, decisions, timeouts, pending]

    def durations(self) -> list[Metric]:
        response = HistogramMetricFamily(
            "gateway_response_time_seconds",
            "How long a person took to answer a request: raised to approved, rejected, answered "
            "or replied (timeouts and cancellations are not answers)",
            labels=["kind"],
        )
        resume = HistogramMetricFamily(
            "gateway_resume_latency_seconds",
            "Task latency: from a suspension's decision (or timeout) to the worker step that "
            "gave the result to the agent (its AGENT_RESUMED): the queue, a worker claiming the "
            "thread, and the step that runs an approved tool",
        )
        answered = FOR_A_PERSON & Q(
            status__in=[s for s, outcome in OUTCOMES.items() if outcome == "answered"]
        )
        waited = F("decided_at") - F("created_at")
        found = _histograms(
            Suspension.objects.all(),
            {
                "confirmation": (
                    waited,
                    RESPONSE_BUCKETS,
                    answered & Q(kind=Suspension.Kind.CONFIRMATION),
                ),
                "input": (waited, RESPONSE_BUCKETS, answered & Q(kind=Suspension.Kind.INPUT)),
                "resume": (
                    F("resumed_at") - F("decided_at"),
                    RESUME_BUCKETS,
                    Q(resumed_at__isnull=False, decided_at__isnull=False),
                ),
            },
        )
        found |= _histograms(
            replies(),
            {MESSAGE: (F("created_at") - F("asked_at"), RESPONSE_BUCKETS, REPLY)},
        )
        for kind in KINDS:
            response.add_metric([kind], *found[kind])
        resume.add_metric([], *found["resume"])
        return [response, resume]

    def runnable(self) -> list[Metric]:
        waiting = GaugeMetricFamily(
            "gateway_runnable_waiting",
            "Threads (and agent instances) that may run and that no worker holds now",
            labels=["what"],
        )
        oldest = GaugeMetricFamily(
            "gateway_runnable_oldest_seconds",
            "How long the longest of those has waited since it became runnable (or was last "
            "enqueued again); 0 when none waits",
            labels=["what"],
        )
        now = self.clock()
        free = Q(lease_expires_at__isnull=True) | Q(lease_expires_at__lte=now)
        queues = {
            "thread": Thread.objects.filter(
                status=Thread.Status.RUNNING, runnable_since__isnull=False
            ),
            "instance": StackFrame.objects.filter(
                status=StackFrame.Status.ACTIVE, instance__gt=0, runnable_since__isnull=False
            ),
        }
        for what, rows in queues.items():
            found = rows.filter(free).aggregate(n=Count("pk"), since=Min("runnable_since"))
            waiting.add_metric([what], found["n"])
            age = (now - found["since"]).total_seconds() if found["since"] else 0.0
            oldest.add_metric([what], max(age, 0.0))
        return [waiting, oldest]

    def webhooks(self) -> list[Metric]:
        attempts = CounterMetricFamily(
            "gateway_webhook_attempts",
            "Webhook and A2A push POSTs, by result: succeeded (2xx), http_error (any other "
            "status), error (no answer: refused, timed out, address not allowed)",
            labels=["result"],
        )
        results = {
            "succeeded": Q(succeeded=True),
            "http_error": Q(succeeded=False, status_code__isnull=False),
            "error": Q(succeeded=False, status_code__isnull=True),
        }
        found = Attempt.objects.aggregate(
            **{f"n_{result}": Count("pk", filter=q) for result, q in results.items()}
        )
        for result in results:
            attempts.add_metric([result], found[f"n_{result}"])
        deliveries = GaugeMetricFamily(
            "gateway_webhook_deliveries",
            "Webhook and A2A push deliveries (one per event and receiver) by status now: "
            "pending (being retried), succeeded, failed (dead-lettered; a replay makes it "
            "pending again)",
            labels=["status"],
        )
        counts = dict(Delivery.objects.values_list("status").annotate(n=Count("pk")).order_by())
        for status in Delivery.Status.values:
            deliveries.add_metric([status], counts.get(status, 0))
        return [attempts, deliveries]
