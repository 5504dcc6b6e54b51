"""MCP clients against a live gateway (daphne, from the browser tests' fixtures) in front of a
real upstream MCP server (tests.mcp_gateway.upstream) in a process of its own."""

import asyncio
import json
import os
import subprocess
import sys
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx2
import pytest
from mcp import Client
from mcp.client.streamable_http import streamable_http_client

from tests.conftest import ROOT, ChildProcess, wait_for
from tests.e2e.conftest import free_port
from tests.external.conftest import (  # noqa: F401 - fixtures, used by name
    Reviewer,
    daphne_server,
    gateway_url,
    reviewer,
    token,
)

# The live daphne takes its environment from this process's (tests.conftest.worker_env, which
# adds the MCP calls' hold and lease the tests need): the upstream's token its headers name.
os.environ["MCP_TEST_FILES_TOKEN"] = "upstream-secret"

# Declared a 2025 revision: the upstream speaks both, and its `confirm_name` and `sign_in` ask
# over the session (`ctx.elicit`), which the newest revision cannot carry (test_plain_http's
# DiscoverTestCase: undeclared, the gateway speaks the newest, as the official client does).
FILES = """
mcp_servers:
  - name: files
    url: {url}
    revision: 2025-11-25
    headers: {{Authorization: "Bearer ${{MCP_TEST_FILES_TOKEN}}"}}
    trust_annotations: true
"""


class Upstream(ChildProcess):
    def __init__(self, log_dir: Path, mode: str = "") -> None:
        self.mode = mode  # "json": stateless, answering in JSON (tests.mcp_gateway.upstream)
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}/mcp"
        self.calls = log_dir / "calls.jsonl"
        self.out = log_dir / "upstream.log"

    def start(self) -> None:
        self.proc = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "tests.mcp_gateway.upstream",
                str(self.port),
                str(self.calls),
                *([self.mode] if self.mode else []),
            ],
            cwd=ROOT,
            stdout=self.out.open("w"),
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
        wait_for(self.answers, timeout=30, what="the upstream MCP server")

    def answers(self) -> bool:
        try:
            urllib.request.urlopen(self.url, timeout=2)
        except urllib.error.HTTPError:
            return True  # it answers (a GET without a session is refused)
        except OSError:
            return False
        return True

    def deleted(self) -> list[dict[str, Any]]:
        if not self.calls.exists():
            return []
        return [json.loads(line) for line in self.calls.read_text().splitlines()]


@pytest.fixture(scope="session")
def upstream(tmp_path_factory: Any) -> Iterator[Upstream]:
    server = Upstream(tmp_path_factory.mktemp("upstream"))
    server.start()
    yield server
    server.stop()


@pytest.fixture
def files(
    upstream: Upstream,
    gateway_url: str,  # noqa: F811 - the imported fixture, requested by name
    load_agents: Any,
    worker: Any,
) -> Upstream:
    """The upstream behind the gateway as `files`, with no call made yet, and the Celery worker
    (with beat) that makes approved calls."""
    upstream.calls.unlink(missing_ok=True)
    load_agents(FILES.format(url=upstream.url))
    return upstream


def run(work: Any) -> Any:
    """A client's coroutine run to its end; an error raised inside the client's task group
    comes out as itself, as a caller of the client sees it."""
    try:
        return asyncio.run(work)
    except BaseExceptionGroup as group:
        error: BaseException = group
        while isinstance(error, BaseExceptionGroup) and len(error.exceptions) == 1:
            error = error.exceptions[0]
        raise error from group


def _http(raw_token: str) -> httpx2.AsyncClient:
    """The client's HTTP client with the token, and time to wait: a held call waits for its
    decision, and a stdio upstream is a process started for the request (on a machine busy
    with both test suites, more than httpx's default 5 s to answer a tools/list)."""
    return httpx2.AsyncClient(
        headers={"Authorization": f"Bearer {raw_token}"}, timeout=httpx2.Timeout(30, read=120)
    )


def call(url: str, raw_token: str, tool: str, arguments: dict[str, Any]) -> Any:
    """One tools/call through the official client, as a blocking call for the tests."""

    async def go() -> Any:
        async with Client(streamable_http_client(url, http_client=_http(raw_token))) as client:
            return await client.call_tool(tool, arguments)

    return run(go())


def list_tools(url: str, raw_token: str) -> Any:
    async def go() -> Any:
        async with Client(streamable_http_client(url, http_client=_http(raw_token))) as client:
            return (await client.list_tools()).tools

    return run(go())
