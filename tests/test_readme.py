"""The curl walk-through of docs/getting-started.md, run as written against a server started
by `make run` on another port than the default (PORT, as the page says), with only the token
pasted in."""

import asyncio
import contextlib
import os
import re
import signal
import socket
import subprocess
import time
import uuid
from pathlib import Path
from typing import Any

import httpx
import httpx2
import pytest
from mcp import Client
from mcp.client.streamable_http import streamable_http_client

from tests.conftest import ROOT, wait_for


def walkthrough() -> str:
    text = (ROOT / "docs" / "getting-started.md").read_text()
    match = re.search(r"<!-- walkthrough:.*?-->\n```sh\n(.*?)```", text, re.S)
    assert match, "docs/getting-started.md has no walk-through block"
    return match.group(1)


def mcp_walkthrough() -> str:
    text = (ROOT / "README.md").read_text()
    match = re.search(r"<!-- mcp-walkthrough:.*?-->\n```sh\n(.*?)```", text, re.S)
    assert match, "README.md has no MCP walk-through block"
    return match.group(1)


async def call_tool(url: str, token: str, tool: str, arguments: dict) -> Any:
    """A tool called as the MCP section's client does, with the official SDK's client."""
    http = httpx2.AsyncClient(
        headers={"Authorization": f"Bearer {token}"}, timeout=httpx2.Timeout(30, read=120)
    )
    async with Client(streamable_http_client(url, http_client=http)) as client:
        if tool == "tools/list":
            return [t.name for t in (await client.list_tools()).tools]
        return await client.call_tool(tool, arguments)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


# The environment each `make run` of the fixture was given, by its process id: a reader's
# commands beside it (`manage.py ...`) use the same data.
ENVIRONMENTS: dict[int, dict[str, str]] = {}


def make_run_env(proc: subprocess.Popen) -> dict[str, str]:
    return ENVIRONMENTS[proc.pid]


@pytest.fixture
def make_run(tmp_path: Path, request: pytest.FixtureRequest):
    """`make run` on a fresh data folder (and a fresh PostgreSQL database in that setup);
    a test may add environment variables through indirect parametrization."""
    port = free_port()
    env = dict(os.environ)
    env.update(getattr(request, "param", {}))
    run_id = uuid.uuid4().hex[:8]
    env.update(
        PORT=str(port),
        # Its own demo MCP server: runs side by side (the two halves of the tests) share none.
        DEMO_MCP_PORT=str(free_port()),
        GATEWAY_DATA_DIR=str(tmp_path / "data"),
        GATEWAY_QUEUE=f"walkthrough-{run_id}",
        GATEWAY_PREFIX=f"walkthrough{run_id}",
    )
    database = None
    if os.environ.get("DATABASE_URL"):
        import psycopg

        base = os.environ["DATABASE_URL"].rsplit("/", 1)[0]
        database = f"gw_walkthrough_{run_id}"
        with psycopg.connect(f"{base}/postgres", autocommit=True) as conn:
            conn.execute(f"CREATE DATABASE {database}")
        env["DATABASE_URL"] = f"{base}/{database}"
    log = tmp_path / "make-run.log"
    proc = subprocess.Popen(
        ["make", "--no-print-directory", "run"],
        cwd=ROOT,
        env=env,
        stdout=log.open("w"),
        stderr=subprocess.STDOUT,
        start_new_session=True,
    )
    ENVIRONMENTS[proc.pid] = env
    try:
        wait_for(
            lambda: "Serving on" in log.read_text() or proc.poll() is not None,
            # A wait, not a figure: a loaded 2-core machine takes minutes (pyproject.toml
            # changed since the last run: an install first).
            timeout=300,
            what="make run to print its URL",
        )
        assert proc.poll() is None, log.read_text()
        # "Serving on" comes once the server answers (and the workers are ready).
        assert _answers(port), log.read_text()
        yield proc, port, log
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGINT)  # what Ctrl-C in the terminal sends
            try:
                proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait()
        if database:
            import psycopg

            time.sleep(0.5)
            with psycopg.connect(f"{base}/postgres", autocommit=True) as conn:
                conn.execute(f"DROP DATABASE IF EXISTS {database} WITH (FORCE)")


def _answers(port: int) -> bool:
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=1):
            return True
    except OSError:
        return False


class ReadmeTestCase:
    @pytest.mark.parametrize(
        "make_run", [{}, {"WEB_PROCESSES": "2"}], indirect=True, ids=["one-daphne", "two-daphnes"]
    )
    def test_the_walkthrough_works_as_written(
        self, make_run, request: pytest.FixtureRequest
    ) -> None:
        proc, port, log = make_run
        printed = log.read_text()
        # As many daphne processes as WEB_PROCESSES asks for, all serving the one port.
        wanted = int(request.node.callspec.params["make_run"].get("WEB_PROCESSES", "1"))
        token = re.search(r"Token:\s+(gw_\S+)", printed).group(1)
        login = re.search(r"Login:\s+(\S+) / (\S+)", printed)
        assert login and login.group(1) == "reviewer"
        assert f"Serving on http://127.0.0.1:{port}/" in printed
        # Once every part is ready, one block says what runs and where, then "Serving on".
        said = printed[printed.index("Starting ") :]
        block = said[said.index("Ready in") : said.index("Serving on")]
        # Two run workers: WORKER_CONCURRENCY's default, one step each (the solo pool); and the
        # demo MCP server.
        for part in ("web", "worker1, worker2", "deadlines", "mcp-notes"):
            assert re.search(rf"^  {part} ", block, re.M), printed
        # The clock (the sweeper and the channels' rounds) is a thread of the deadlines worker.
        assert re.search(r"^  deadlines +deadlines; the clock", block, re.M), printed
        assert f"(daphne, {wanted} processes)" in block if wanted > 1 else "(daphne)" in block

        def daphnes() -> list[str]:
            found = subprocess.run(
                ["pgrep", "-g", str(proc.pid), "-f", "m daphne "], capture_output=True, text=True
            )
            return found.stdout.split()

        wait_for(lambda: len(daphnes()) == wanted, timeout=30, what=f"{wanted} daphne processes")

        script = walkthrough()
        assert port != 8000 and "${PORT:-8000}" in script
        # As a reader does: paste the token, and export the PORT make run was given.
        script = script.replace("gw_paste_the_token_make_run_printed", token)
        result = subprocess.run(
            ["bash", "-euo", "pipefail", "-c", script],
            capture_output=True,
            text=True,
            timeout=120,
            env={**os.environ, "PORT": str(port)},
        )
        assert result.returncode == 0, result.stdout + result.stderr
        out = result.stdout
        assert '"status": "suspended"' in out and '"tool": "transfer_funds"' in out
        assert '"status": "completed"' in out and "The invoice is paid." in out
        types = re.findall(r"^\d+ (\w+)$", out, re.M)
        assert types == [
            "THREAD_STARTED",
            "AGENT_MESSAGE",
            "TOOL_CALLED",
            "TOOL_RESULT",
            "AGENT_MESSAGE",
            "TOOL_CALLED",
            "AGENT_SUSPENDED",
            "SUSPENSION_DECIDED",
            "AGENT_RESUMED",
            "TOOL_RESULT",
            "AGENT_MESSAGE",
            "THREAD_COMPLETED",
        ]

    def test_a_worker_that_exits_by_itself_is_started_again(self, make_run) -> None:
        proc, port, log = make_run

        def deadline_workers() -> list[str]:
            found = subprocess.run(
                ["pgrep", "-g", str(proc.pid), "-f", "deadlines@"],
                capture_output=True,
                text=True,
            )
            return found.stdout.split()

        first = wait_for(deadline_workers, timeout=30, what="the deadline worker")
        for pid in first:
            os.kill(int(pid), signal.SIGKILL)
        wait_for(
            lambda: (now := deadline_workers()) and not set(now) & set(first),
            timeout=30,
            what="serve to start the deadline worker again",
        )
        assert "deadlines exited with" in log.read_text()
        assert proc.poll() is None and _answers(port)

    def test_ctrl_c_stops_the_server_and_the_workers(self, make_run) -> None:
        proc, port, log = make_run
        children = subprocess.run(
            ["pgrep", "-g", str(proc.pid)], capture_output=True, text=True
        ).stdout.split()
        # make, serve, daphne, two run workers, deadlines (with the clock), the demo MCP server
        assert len(children) >= 6
        os.killpg(proc.pid, signal.SIGINT)
        proc.wait(timeout=30)
        wait_for(
            lambda: not subprocess.run(["pgrep", "-g", str(proc.pid)], capture_output=True).stdout,
            timeout=20,
            what="every process of make run to stop",
        )
        assert not _answers(port)

    def test_the_mcp_section_works_as_written(self, make_run) -> None:
        proc, port, log = make_run
        reviewer = re.search(r"Token:\s+(gw_\S+)", log.read_text()).group(1)
        script = mcp_walkthrough()
        # docs/mcp.md's "Try it with make run" gives the same commands.
        assert f"```sh\n{script}```" in (ROOT / "docs" / "mcp.md").read_text()
        # The client's line: Claude Code is not here, the official SDK's client calls instead,
        # at the URL and with the header the line gives it.
        *commands, claude = script.strip().splitlines()
        assert claude.startswith("claude mcp add --transport http notes ")
        url = re.search(r"(http://\S+/mcp/notes)", claude).group(1)
        url = url.replace(":8000/", f":{port}/")
        assert '--header "Authorization: Bearer $TOKEN"' in claude
        result = subprocess.run(
            ["bash", "-euo", "pipefail", "-c", "\n".join([*commands, 'echo "$TOKEN"'])],
            cwd=ROOT,
            capture_output=True,
            text=True,
            timeout=120,
            env=make_run_env(proc),
        )
        assert result.returncode == 0, result.stdout + result.stderr
        token = result.stdout.split()[-1]
        assert token.startswith("gw_")

        base = f"http://127.0.0.1:{port}/api"
        auth = {"Authorization": f"Bearer {reviewer}"}

        async def pending(name: str) -> dict:
            def find() -> dict | None:
                found = httpx.get(f"{base}/suspensions?status=pending", headers=auth).json()
                return next((s for s in found["results"] if s["input"] == {"name": name}), None)

            return await asyncio.to_thread(wait_for, find, 60, 0.2, f"the call on {name}")

        def approve(s: dict) -> httpx.Response:
            return httpx.post(
                f"{base}/threads/{s['thread']}/suspensions/{s['id']}/resume",
                headers=auth,
                json={"approved": True},
            )

        async def scenario() -> None:
            assert await call_tool(url, token, "tools/list", {}) == [
                "list_notes",
                "read_note",
                "delete_note",
            ]
            read = await call_tool(url, token, "read_note", {"name": "welcome"})
            assert not read.is_error and "demo MCP server" in read.content[0].text
            # The reviewer's own call: four eyes keeps the reviewer from approving it.
            own = asyncio.create_task(call_tool(url, reviewer, "delete_note", {"name": "launch"}))
            refused = approve(await pending("launch"))
            assert refused.status_code == 403 and refused.json()["rule"] == "four_eyes"
            own.cancel()
            with contextlib.suppress(BaseException):
                await own
            # claude-code-user's call waits for the reviewer, then runs once.
            held = asyncio.create_task(call_tool(url, token, "delete_note", {"name": "welcome"}))
            assert approve(await pending("welcome")).status_code in (200, 202)
            deleted = await held
            assert not deleted.is_error and deleted.content[0].text == "Deleted the note 'welcome'."
            gone = await call_tool(url, token, "read_note", {"name": "welcome"})
            assert gone.is_error

        asyncio.run(scenario())
