"""/readyz: 200 when the database, the broker, the channel layer, the sweeper and the receipts'
key work; 503 naming what is down. /healthz stays a liveness probe that touches nothing."""

import json
import os
import subprocess
import sys
import time
import uuid

import pytest

from agents import receipt_keys
from infra import beat_lease, last_runs
from tests.conftest import ROOT

PROBE = """
import json, os
import django
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "gateway.settings")
django.setup()
from django.test import RequestFactory
from gateway import readiness
answer = readiness.ready(RequestFactory().get("/readyz"))
print(json.dumps({"status": answer.status_code, **json.loads(answer.content)}))
"""


def probe(tmp_path, **env: str) -> dict:
    """/readyz in a fresh process with `env` over this one's (a setting that points nowhere)."""
    done = subprocess.run(
        [sys.executable, "-c", PROBE],
        cwd=ROOT,
        env={**os.environ, "GATEWAY_DATA_DIR": str(tmp_path), **env},
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(done.stdout.strip().splitlines()[-1])


@pytest.fixture
def fresh_queue(settings) -> str:
    """A name of its own for this test's sweeper marks (infra.last_runs keys them by queue)."""
    settings.CELERY_TASK_DEFAULT_QUEUE = f"readyz-{uuid.uuid4().hex[:8]}"
    return settings.CELERY_TASK_DEFAULT_QUEUE


@pytest.mark.django_db
class ReadyTestCase:
    def test_it_answers_200_when_all_is_up(self, client, settings, tmp_path, fresh_queue) -> None:
        settings.DATA_DIR = tmp_path
        last_runs.mark("sweep")
        answer = client.get("/readyz", HTTP_HOST="127.0.0.1")
        assert answer.status_code == 200, answer.content
        assert answer.json()["ok"] is True and answer.json()["down"] == {}

    def test_it_names_a_sweeper_that_never_ran_or_fell_behind(
        self, client, settings, tmp_path, fresh_queue
    ) -> None:
        settings.DATA_DIR = tmp_path
        answer = client.get("/readyz", HTTP_HOST="127.0.0.1")
        assert answer.status_code == 503
        assert answer.json()["down"] == {"sweeper": "has not run yet"}
        last_runs.mark("sweep", now=time.time() - settings.SWEEP_STALE_SECONDS - 5)
        answer = client.get("/readyz", HTTP_HOST="127.0.0.1")
        assert answer.status_code == 503
        assert list(answer.json()["down"]) == ["sweeper"]
        assert "last ran" in answer.json()["down"]["sweeper"]

    def test_it_names_a_secret_key_that_cannot_open_the_receipts_key(
        self, client, settings, tmp_path, fresh_queue
    ) -> None:
        """A machine started with another SECRET_KEY than the one the receipts' key was
        sealed under: every decision there would fail to sign; /readyz says why."""
        settings.DATA_DIR = tmp_path
        last_runs.mark("sweep")
        receipt_keys.forget()
        receipt_keys.current()  # the key, made and sealed under this SECRET_KEY
        settings.SECRET_KEY = "another machine's secret key, not the deployment's"
        settings.SECRET_KEY_FALLBACKS = []
        receipt_keys.forget()
        try:
            answer = client.get("/readyz", HTTP_HOST="127.0.0.1")
        finally:
            receipt_keys.forget()
        assert answer.status_code == 503
        assert list(answer.json()["down"]) == ["receipts"]
        assert "SECRET_KEY" in answer.json()["down"]["receipts"]

    def test_healthz_stays_200_whatever_is_down(self, client, settings, tmp_path, fresh_queue):
        settings.DATA_DIR = tmp_path
        assert client.get("/healthz", HTTP_HOST="127.0.0.1").json() == {"ok": True}


class ReadyWhenServicesAreDownTestCase:
    def test_it_names_the_database(self, tmp_path) -> None:
        env = {"DATABASE_URL": f"sqlite:///{tmp_path}/no/such/folder/db.sqlite3"}
        env["REDIS_URL"] = ""  # the embedded broker, which is up
        answer = probe(tmp_path, **env)
        assert answer["status"] == 503
        assert "database" in answer["down"] and "broker" not in answer["down"]

    def test_it_names_the_broker_and_the_channel_layer(self, tmp_path) -> None:
        # A database of its own: this is about Redis, and the PostgreSQL of a loaded test run
        # may have no connection to spare within the probe's 10 s.
        database = f"sqlite:///{tmp_path}/db.sqlite3"
        answer = probe(tmp_path, REDIS_URL="redis://127.0.0.1:1/0", DATABASE_URL=database)
        assert answer["status"] == 503
        assert {"broker", "channel_layer", "sweeper"} <= set(answer["down"])
        assert "database" not in answer["down"]


@pytest.mark.django_db
class OperationsGaugesTestCase:
    def test_the_metrics_say_when_the_sweeper_ran_and_who_holds_the_lease(
        self, client, settings, tmp_path, fresh_queue
    ) -> None:
        settings.DATA_DIR = tmp_path
        settings.METRICS_TOKEN = "gauges"
        settings.BEAT_LEASE_KEY = f"{fresh_queue}:beat-lease"
        last_runs.mark("sweep", now=1_700_000_000.0)
        lease = beat_lease.lease("host-a:42")
        assert lease.take()
        try:
            answer = client.get(
                "/metrics", HTTP_HOST="127.0.0.1", HTTP_AUTHORIZATION="Bearer gauges"
            )
        finally:
            lease.release()
        text = answer.content.decode()
        assert "gateway_sweeper_last_run_timestamp_seconds 1.7e+09" in text
        assert 'gateway_beat_lease_held{holder="host-a:42"} 1.0' in text
        assert client.get("/readyz", HTTP_HOST="127.0.0.1").json()["beat_lease_holder"] is None
