"""The gauges of the processes around the engine: when the sweeper last ran, and which clock
holds the beat lease (infra.last_runs, infra.beat_lease). Read at each scrape from where every
machine writes them, so any daphne process answers with the same figures."""

from collections.abc import Iterator

from prometheus_client.core import GaugeMetricFamily, Metric
from prometheus_client.registry import Collector
from redis.exceptions import RedisError

from infra import beat_lease, last_runs


class OperationsCollector(Collector):
    def collect(self) -> Iterator[Metric]:
        swept = GaugeMetricFamily(
            "gateway_sweeper_last_run_timestamp_seconds",
            "When the sweeper (deadlines, reminders, stalled runs) last ran to the end, as a "
            "Unix time; alert when it falls behind the time by more than a few sweep intervals",
        )
        beat = GaugeMetricFamily(
            "gateway_beat_lease_held",
            "1 for the clock holding the beat lease (host:pid), the one that runs the sweeps; "
            "no sample while no clock holds it",
            labels=["holder"],
        )
        try:
            when = last_runs.last_run("sweep")
            holder = beat_lease.holder()
        except RedisError:
            # Redis down: no figure rather than a wrong one (/readyz names the broker).
            return
        if when is not None:
            swept.add_metric([], when)
        if holder:
            beat.add_metric([holder], 1)
        yield swept
        yield beat
