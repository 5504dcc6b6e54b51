"""Reading /metrics as Prometheus does: the exposition parsed by prometheus_client's parser."""

from typing import Any

from prometheus_client.parser import text_string_to_metric_families

TOKEN = "metrics-test-token-1"


def scrape(client: Any, token: str = TOKEN) -> dict[str, dict[tuple, float]]:
    """{sample name: {sorted label pairs: value}} from one GET /metrics."""
    r = client.get("/metrics", headers={"Authorization": f"Bearer {token}"})
    assert r.status_code == 200, r.content
    assert r["Content-Type"].startswith("text/plain; version=0.0.4")
    samples: dict[str, dict[tuple, float]] = {}
    for family in text_string_to_metric_families(r.content.decode()):
        for sample in family.samples:
            samples.setdefault(sample.name, {})[tuple(sorted(sample.labels.items()))] = sample.value
    return samples


def labels(**pairs: str) -> tuple:
    return tuple(sorted(pairs.items()))
