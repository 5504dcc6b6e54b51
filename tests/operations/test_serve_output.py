"""What `manage.py serve --demo` (`make run`) prints: one block once every process is ready (what
runs and where, the demo's logins), then only warnings and errors: no Celery banner, no kombu
warning, no daphne notice or access log, no line for an expected 4xx answer or after an MCP
call. Run on the embedded setup, as a newcomer's `make run` is."""

import asyncio
import os
import re
import subprocess
import sys
import uuid
from pathlib import Path

import httpx
import httpx2
from mcp import Client
from mcp.client.streamable_http import streamable_http_client

from tests.conftest import ROOT, wait_for
from tests.operations.test_serve_roles import Serve
from tests.operations.test_two_machines import _free_port

# What the processes said before serve printed its block, each of them once per process.
NOISE = (
    "[config]",  # a worker's banner
    "concurrency:",
    "kombu.connection",
    "No hostname was supplied",
    "HTTP/2 support not enabled",
    "daphne.server",
    "SecurityWarning",
)


def embedded(tmp_path: Path) -> dict[str, str]:
    run = uuid.uuid4().hex[:8]
    env = {
        k: v
        for k, v in os.environ.items()
        if k not in ("DATABASE_URL", "REDIS_URL", "LOG_LEVEL", "LOG_FORMAT")
    }
    return {
        **env,
        "GATEWAY_DATA_DIR": str(tmp_path / "data"),
        "GATEWAY_QUEUE": f"output-{run}",
        "GATEWAY_PREFIX": f"output{run}",
        "PYTHONPATH": str(ROOT),
    }


async def read_note(url: str, token: str) -> str:
    # Time to answer on a busy machine: the first relayed call loads the MCP client in the web
    # process (httpx's default would give up after 5 s).
    http = httpx2.AsyncClient(
        headers={"Authorization": f"Bearer {token}"}, timeout=httpx2.Timeout(30, read=120)
    )
    async with Client(streamable_http_client(f"{url}mcp/notes", http_client=http)) as client:
        result = await client.call_tool("read_note", {"name": "welcome"})
    assert not result.is_error, result
    return result.content[0].text


class ServeOutputTestCase:
    def test_the_demo_says_one_block_then_only_what_needs_a_person(self, tmp_path: Path) -> None:
        env = embedded(tmp_path)
        subprocess.run(
            [sys.executable, "manage.py", "migrate", "--noinput", "-v0"],
            cwd=ROOT,
            env=env,
            check=True,
        )
        port, notes = _free_port(), _free_port()
        env["DEMO_MCP_PORT"] = str(notes)
        serve = Serve(tmp_path / "serve.log", env, "--demo", "--port", str(port))
        try:
            serve.wait_for("Serving on")
            said = serve.text()
            block = said[said.index("Ready in") : said.index("Serving on")]
            # Nothing but serve's own lines from "Starting" to "Ready" (and the clock's, about
            # its lease: the gateway's own INFO line).
            before = said[said.index("Starting ") : said.index("Ready in")].splitlines()[1:]
            own = ("Still starting after", "Running as root")
            assert [x for x in before if not x.startswith(own) and "gateway.clock" not in x] == []
            for noise in NOISE:
                assert noise not in said, (noise, said)
            url = f"http://127.0.0.1:{port}/"
            assert f"web               {url}" in block
            assert "worker1, worker2  run the agents" in block
            assert (
                f"mcp-notes         the demo MCP server on :{notes}; MCP clients: {url}mcp/notes"
                in block
            )
            assert "Demo agents created (demo/agents.yaml): ops, finance" in block
            assert re.search(r"Login:\s+reviewer / \S+", block)
            assert re.search(r"Admin:\s+admin / \S+", block)
            token = re.search(r"Token:\s+(gw_\S+)", block).group(1)

            # An expected 404 and 409, and an MCP call through the gateway: nothing said.
            auth = {"Authorization": f"Bearer {token}"}
            assert httpx.get(f"{url}api/threads/{uuid.uuid4()}", headers=auth).status_code == 404
            thread = httpx.post(
                f"{url}api/threads", headers=auth, json={"agent": "finance", "message": "Pay"}
            ).json()["id"]
            cancel = f"{url}api/threads/{thread}/cancel"
            wait_for(
                lambda: httpx.post(cancel, headers=auth).status_code == 409,
                timeout=60,
                what="a second cancel to answer 409",
            )
            assert asyncio.run(read_note(url, token)).startswith("This note comes from")
            after = serve.text()[len(said) :]
            assert after == "", after
        finally:
            serve.stop()


def logging_of(env: dict[str, str]) -> str:
    code = (
        "import django; django.setup(); from django.conf import settings; "
        "print(sorted(settings.LOGGING['loggers'].items()))"
    )
    return subprocess.run(
        [sys.executable, "-c", code],
        cwd=ROOT,
        env={**env, "DJANGO_SETTINGS_MODULE": "gateway.settings"},
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    ).stdout


def test_log_level_set_lets_the_libraries_say_more(tmp_path: Path) -> None:
    quiet = logging_of(embedded(tmp_path))
    assert "('daphne', {'level': 'WARNING'})" in quiet and "no_client_errors" in quiet
    told = logging_of({**embedded(tmp_path), "LOG_LEVEL": "info"})
    assert "daphne" not in told and "no_client_errors" not in told
