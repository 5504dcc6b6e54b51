"""What a Celery worker of `make run` (the embedded setup) loads when it starts: none of the
libraries that only some tasks use. Each of them cost every worker memory for as long as it
ran (issue 42: the MCP client and aiohttp some 35 MB, httpx with rich, the A2A SDK,
psycopg, redis-py and slack_sdk some 25 MB more); they are imported where they are used."""

import json
import os
import subprocess
import sys
from pathlib import Path

from tests.test_architecture import ROOT

# What `manage.py serve` starts a worker with (CELERY_SKIP_CHECKS: serve ran Django's checks).
STARTING = """
import json, sys
import django
django.setup()
from gateway.celery import app
app.loader.import_default_modules()  # the task modules, as the worker does
app.connection().default_channel  # the broker's transport
print(json.dumps(sorted(sys.modules)))
"""

LOADED_ON_USE = {
    "mcp": "the MCP client (mcp_gateway.runner)",
    "mcp_types": "the MCP types (mcp_gateway.runner)",
    "aiohttp": "the relay's HTTP client (mcp_gateway.forward)",
    "httpx": "the webhooks' HTTP client (webhooks.outbox)",
    "rich": "httpx's command line, imported with httpx",
    "a2a": "the A2A SDK (a2a_server.notifications)",
    "psycopg": "PostgreSQL's driver (infra.dbpool)",
    "redis": "redis-py (infra.broker, infra.last_runs, agents.events)",
    "slack_sdk": "Slack's client (slack_approvals.client)",
}


def test_an_embedded_worker_starts_without_the_libraries_only_some_tasks_use(
    tmp_path: Path,
) -> None:
    env = {
        k: v
        for k, v in os.environ.items()
        if k not in ("DATABASE_URL", "REDIS_URL") and not k.startswith("PYTEST")
    }
    env.update(
        DJANGO_SETTINGS_MODULE="gateway.settings",
        GATEWAY_DATA_DIR=str(tmp_path),
        CELERY_SKIP_CHECKS="true",
    )
    out = subprocess.run(
        [sys.executable, "-c", STARTING],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        check=True,
        timeout=120,
    ).stdout
    loaded = {m.split(".")[0] for m in json.loads(out.splitlines()[-1])}
    assert {name: why for name, why in LOADED_ON_USE.items() if name in loaded} == {}
