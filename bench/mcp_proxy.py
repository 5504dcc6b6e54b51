"""MCP tool calls through the gateway's /mcp/<name> against the same upstream called directly.

    .venv/bin/python bench/mcp_proxy.py --seconds 10 --gated 100

Immediate calls: for 1 and then 8 concurrent clients, the upstream's read-only tool
(`read_note`, passed through without a person) called for SECONDS seconds directly, then
through the gateway, in the same run. Each client is a process of its own, as an agent is,
holding one official `mcp.Client` for all its calls; direct and gateway clients are built
alike (the client asks `server/discover` and speaks 2026-07-28, statelessly, to both). The
gateway speaks to the upstream as the client does, or as `--revision` declares it (2025-11-25:
a session). Reports p50
and p99 latency and calls per second, the gateway's overhead at p50, its calls per second as
a share of the direct calls, and the CPU milliseconds per call of each process taking part
(the clients, the upstream, the gateway's by kind, PostgreSQL and Redis). Targets: p50
overhead ≤ 3 ms; at 8 clients ≥ 0.5 × the direct calls per second.

Gated calls: GATED times, one at a time, a client calls the destructive `delete_file`, which
is held until a person decides; the benchmark waits until its request is pending
(GET /api/suspensions), then POSTs an approval. Measured: the POST's send to the client's
result (the upstream called once in between). Target: p50 ≤ 50 ms.

`--combined`: the gateway's calls go to /mcp, every upstream's tools on one endpoint, as
`files__read_note` and `files__delete_file`.

The upstream is the tests' (tests/mcp_gateway/upstream.py) in a process of its own; the
gateway is `manage.py serve` (daphne and the Celery workers) on a fresh database
(bench/common.py). The script is not named mcp.py: run as a script, bench/ comes first on
sys.path and such a file would be imported in place of the SDK. Talks only to 127.0.0.1.
"""

import argparse
import asyncio
import multiprocessing
import os
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

from common import ROOT, Gateway, free_port, pctl, summary

FILES = """
mcp_servers:
  - name: files
    url: {url}
    revision: "{revision}"
    trust_annotations: true
    # The benchmark's one token calls and approves: four eyes would refuse that.
    policy: {{four_eyes: false}}
"""
TOOL, ARGUMENTS = "read_note", {"name": "bench"}
PENDING = "/api/suspensions?status=pending&agent=files"


class Upstream:
    """tests/mcp_gateway/upstream.py on a free port, started and stopped with the block."""

    def __init__(self, stateless: bool = False) -> None:
        self.stateless = stateless
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}/mcp"
        self.tmp = Path(tempfile.mkdtemp(prefix="mcp-bench-"))

    def __enter__(self) -> "Upstream":
        self.log = (self.tmp / "upstream.log").open("w")
        self.proc = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "tests.mcp_gateway.upstream",
                str(self.port),
                str(self.tmp / "deleted.jsonl"),
                *(["json"] if self.stateless else []),
            ],
            cwd=ROOT,
            stdout=self.log,
            stderr=subprocess.STDOUT,
        )
        deadline = time.monotonic() + 30
        while not self.answers():
            if time.monotonic() > deadline or self.proc.poll() is not None:
                raise RuntimeError(f"the upstream did not start: {self.tmp / 'upstream.log'}")
            time.sleep(0.2)
        return self

    def answers(self) -> bool:
        try:
            urllib.request.urlopen(self.url, timeout=2)
        except urllib.error.HTTPError:
            return True  # it answers (a GET without a session is refused)
        except OSError:
            return False
        return True

    def cpu_seconds(self) -> float:
        """The upstream process's CPU time (user + system) so far."""
        fields = Path(f"/proc/{self.proc.pid}/stat").read_text().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")

    def __exit__(self, *exc: Any) -> None:
        self.proc.terminate()
        self.proc.wait(timeout=30)
        self.log.close()


def client(
    url: str, token: str | None, tool: str, seconds: float, warmup: int, start: Any, results: Any
) -> None:
    """One client process: a session, WARMUP untimed calls, the start line shared with the
    other clients, then calls for SECONDS seconds; puts its latencies on `results`."""

    async def go() -> list[float]:
        import httpx2
        from mcp import Client
        from mcp.client.streamable_http import streamable_http_client

        headers = {"Authorization": f"Bearer {token}"} if token else {}
        http = httpx2.AsyncClient(headers=headers, timeout=httpx2.Timeout(30, read=120))
        async with Client(streamable_http_client(url, http_client=http)) as session:
            for _ in range(warmup):
                await session.call_tool(tool, ARGUMENTS)
            await asyncio.to_thread(start.wait)
            took: list[float] = []
            cpu = time.process_time()
            stop = time.monotonic() + seconds
            while time.monotonic() < stop:
                t0 = time.perf_counter()
                result = await session.call_tool(tool, ARGUMENTS)
                took.append(time.perf_counter() - t0)
                if result.is_error:
                    raise RuntimeError(f"{url}: {result.content}")
            return took, time.process_time() - cpu

    results.put(asyncio.run(go()))


def immediate(
    url: str, token: str | None, clients: int, seconds: float, warmup: int, tool: str = TOOL
) -> Any:
    """The latencies of every call of CLIENTS client processes, the calls per second, and the
    CPU seconds the clients used while timed."""
    spawn = multiprocessing.get_context("spawn")
    start, results = spawn.Barrier(clients), spawn.Queue()
    procs = [
        spawn.Process(target=client, args=(url, token, tool, seconds, warmup, start, results))
        for _ in range(clients)
    ]
    for p in procs:
        p.start()
    took: list[float] = []
    cpu = 0.0
    for _ in procs:
        latencies, used = results.get(timeout=seconds + 120)
        took += latencies
        cpu += used
    for p in procs:
        p.join(timeout=30)
    return took, len(took) / seconds, cpu


def cpu_report(calls: int, used: dict[str, float]) -> str:
    """CPU milliseconds per call, by process kind."""
    parts = (f"{kind} {seconds / calls * 1000:.2f}" for kind, seconds in sorted(used.items()))
    return "  CPU ms per call: " + ", ".join(parts)


async def gated(gw: Gateway, url: str, count: int, tool: str) -> None:
    import httpx2
    from mcp import Client
    from mcp.client.streamable_http import streamable_http_client

    http = httpx2.AsyncClient(
        headers={"Authorization": f"Bearer {gw.token}"}, timeout=httpx2.Timeout(30, read=120)
    )
    decided, answered = [], []
    async with Client(streamable_http_client(url, http_client=http)) as session:
        for i in range(-3, count):  # three untimed first
            held = asyncio.create_task(session.call_tool(tool, {"path": f"/tmp/b{i}"}))
            while True:
                pending = (await asyncio.to_thread(gw.call, "GET", PENDING))["results"]
                if pending:
                    break
                await asyncio.sleep(0.005)
            [s] = pending
            path = f"/api/threads/{s['thread']}/suspensions/{s['id']}/resume"
            t0 = time.perf_counter()
            await asyncio.to_thread(gw.call, "POST", path, {"approved": True})
            t1 = time.perf_counter()
            result = await held
            t2 = time.perf_counter()
            if result.is_error:
                raise RuntimeError(f"gated call {i}: {result.content}")
            if i >= 0:
                decided.append(t2 - t0)
                answered.append(t1 - t0)
    print(summary("gated", decided), "  (decision POST sent → the held call's result)")
    print(summary("POST", answered), "  (decision POST sent → its 202)")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=10, help="timed seconds per series")
    parser.add_argument("--clients", default="1,8", help="concurrent clients, comma-separated")
    parser.add_argument("--warmup", type=int, default=20, help="untimed calls per client first")
    parser.add_argument("--gated", type=int, default=100, help="gated calls, one at a time")
    parser.add_argument(
        "--workers", type=int, default=2, help="Celery worker processes (serve --concurrency)"
    )
    parser.add_argument(
        "--stateless",
        action="store_true",
        help="the upstream stateless, answering in JSON, declared `revision: 2026-07-28`",
    )
    parser.add_argument(
        "--revision",
        default="",
        help="the revision declared for the upstream (the default one, which speaks both): "
        "2025-11-25 to relay calls on a session",
    )
    parser.add_argument(
        "--combined",
        action="store_true",
        help="call through /mcp (every upstream's tools, named <server>__<tool>)",
    )
    parser.add_argument(
        "--profile",
        metavar="FILE",
        help="py-spy the gateway during its immediate series; collapsed stacks to FILE",
    )
    args = parser.parse_args()
    with (
        Upstream(args.stateless) as upstream,
        Gateway(
            FILES.format(
                url=upstream.url, revision="2026-07-28" if args.stateless else args.revision
            ),
            ["--concurrency", str(args.workers)],
        ) as gw,
    ):
        proxy = f"{gw.base}/mcp" if args.combined else f"{gw.base}/mcp/files"
        prefix = "files__" if args.combined else ""  # the tools' names on /mcp
        print(f"endpoint: {proxy[len(gw.base) :]}")
        print(f"setup: {gw.setup}; load average {os.getloadavg()[0]:.2f} at the start")
        print(
            "upstream: "
            + (
                "stateless, 2026-07-28"
                if args.stateless
                else f"declared {args.revision}"
                if args.revision
                else "undeclared (the newest both speak, asked with server/discover)"
            )
        )
        for clients in (int(c) for c in args.clients.split(",")):
            up0 = upstream.cpu_seconds()
            direct, direct_rate, direct_cpu = immediate(
                upstream.url, None, clients, args.seconds, args.warmup
            )
            direct_used = {"clients": direct_cpu, "upstream": upstream.cpu_seconds() - up0}
            up0, gw0 = upstream.cpu_seconds(), gw.cpu_seconds()
            with gw.profiled(args.profile and f"{args.profile}.{clients}"):
                through, rate, through_cpu = immediate(
                    proxy, gw.token, clients, args.seconds, args.warmup, prefix + TOOL
                )
            used = {k: v - gw0.get(k, 0.0) for k, v in gw.cpu_seconds().items()}
            used |= {"clients": through_cpu, "upstream": upstream.cpu_seconds() - up0}
            print(f"clients: {clients}")
            print(summary("direct", direct), f"  {direct_rate:7.1f} calls/s")
            print(cpu_report(len(direct), direct_used))
            print(summary("gateway", through), f"  {rate:7.1f} calls/s")
            print(cpu_report(len(through), used))
            overhead = pctl(through, 0.5) - pctl(direct, 0.5)
            print(
                f"overhead p50 {overhead:.1f} ms, p99 "
                f"{pctl(through, 0.99) - pctl(direct, 0.99):.1f} ms; "
                f"calls/s {rate / direct_rate:.2f} × direct"
            )
        if args.gated:
            asyncio.run(gated(gw, proxy, args.gated, prefix + "delete_file"))
        print(f"load average {os.getloadavg()[0]:.2f} at the end")


if __name__ == "__main__":
    main()
