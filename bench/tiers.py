"""The tiers' cost per request: from a run's blocking call to its request settled.

For each tier, in this one process, REQUESTS runs of a scripted agent whose one blocking call
is such a request are advanced by the engine (agents.engine.Engine().advance), one after the
other, and the time from the blocking call (the engine raising it: agents.suspending) to the
request settled is measured, wall and CPU (time.process_time):

    person   no rule decides: raised and left pending (settled = committed, pending)
    rule     an auto_approve argument rule decides
    grant    a standing grant decides
    history  an auto_approve rule with a count tally decides (agents.tallies)
    model    a reviewing model in decide mode approves: the real `anthropic` SDK against a
             local stand-in of the Messages API (a thread of this process that answers at
             once with a forced `decide` call); the review step called here, as its Celery
             task would (agents.reviewing.verdicts.review): raise + review, not the queue

The model's own latency is not in it (the stand-in answers at once); its handler's CPU is
taken out of the model tier's. A tier this checkout does not have (before tiered review:
history, model) is skipped.

    .venv/bin/python bench/tiers.py --requests 200 --tiers person,rule,grant,history,model

A fresh database, created and dropped (PostgreSQL when DATABASE_URL is set, else SQLite in
a temporary folder), as bench/common.py makes one; REDIS_URL, when set, is the broker the
engine's tasks are sent to (nothing consumes them; their queue is deleted at the end).
"""

import argparse
import contextlib
import json
import os
import shutil
import sys
import tempfile
import threading
import time
import uuid
from datetime import timedelta
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

from common import ROOT, pctl

sys.path.insert(0, str(ROOT))  # the gateway's `agents`, not a package of that name installed

TIERS = ("person", "rule", "grant", "history", "model")
MODEL = "claude-haiku-4-5"
POLICIES = {
    "person": "",
    "rule": 'policy: {auto_approve: [{arg: amount, op: "<", value: 500}]}',
    "grant": "",
    "history": "policy: {auto_approve: "
    '[{count: transfer_funds, within: 1h, per: agent, op: "<", value: 1000000}]}',
    "model": f"policy: {{review: {{model: {MODEL}, mode: decide, may: [approve], "
    "timeout: 10, per_minute: 10000}}",
}
AGENT = """
  - name: bench_{tier}
    model: scripted
    tools: [transfer_funds]
    tool_overrides:
      transfer_funds: {{execution_mode: blocking, timeout: 600}}
    {policy}
    script:
      - text: Invoice 118 is due.
        tool_calls:
          - name: transfer_funds
            input: {{from_account: ACC-1, to_account: ACC-2, amount: 120, currency: EUR}}
      - text: Done.
"""


def available(tier: str) -> bool:
    """Whether this checkout has the tier (a worktree from before tiered review has not)."""
    module = {"history": "tallies.py", "model": "reviewing/verdicts.py"}.get(tier)
    return module is None or (ROOT / "agents" / module).exists()


class StandIn:
    """POST /v1/messages answered at once with a forced `decide` call that approves; the CPU
    its handlers spent (their own threads) is counted, to be taken out of the tier's."""

    def __init__(self) -> None:
        self.cpu = 0.0
        self.lock = threading.Lock()
        standin = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"  # the SDK keeps its connection

            def do_POST(self) -> None:
                t0 = time.thread_time()
                body = json.loads(self.rfile.read(int(self.headers["content-length"])))
                data = json.dumps(
                    {
                        "id": "msg_01XFDUDYJgAACzvnptvVoYEL",
                        "type": "message",
                        "role": "assistant",
                        "model": body.get("model", ""),
                        "content": [
                            {
                                "type": "tool_use",
                                "id": "toolu_01A09q90qw90lq917835lq9",
                                "name": "decide",
                                "input": {"decision": "approve", "reason": "A small payment."},
                            }
                        ],
                        "stop_reason": "tool_use",
                        "stop_sequence": None,
                        "usage": {"input_tokens": 640, "output_tokens": 41},
                    }
                ).encode()
                self.send_response(200)
                self.send_header("content-type", "application/json")
                self.send_header("content-length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)
                with standin.lock:
                    standin.cpu += time.thread_time() - t0

            def log_message(self, *args: Any) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        threading.Thread(target=self.server.serve_forever, daemon=True).start()
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"

    def stop(self) -> None:
        self.server.shutdown()
        self.server.server_close()


class Raises:
    """Times each raise: from the engine's suspend step (the blocking call) to its return,
    its transaction committed (the request stored, pending or decided by rule or grant)."""

    def __init__(self) -> None:
        from agents import suspending

        owner = getattr(suspending, "Suspensions", None) or suspending.SuspendSteps
        name = "suspend" if hasattr(owner, "suspend") else "_suspend"
        original = getattr(owner, name)
        self.last: tuple[float, float] | None = None
        raises = self

        def timed(*args: Any, **kwargs: Any) -> Any:
            w0, c0 = time.perf_counter(), time.process_time()
            try:
                return original(*args, **kwargs)
            finally:
                raises.last = (time.perf_counter() - w0, time.process_time() - c0)

        setattr(owner, name, timed)


def setup_django(tmp: Path, run: str) -> str | None:
    """Django on a fresh database; the PostgreSQL database's name, to drop, when there is one."""
    os.environ.update(
        GATEWAY_DATA_DIR=str(tmp),
        GATEWAY_QUEUE=f"bench-{run}",
        GATEWAY_PREFIX=f"bench{run}",
        LOG_LEVEL="WARNING",
        DJANGO_SETTINGS_MODULE="gateway.settings",
    )
    database = None
    if os.environ.get("DATABASE_URL"):
        import psycopg

        server = os.environ["DATABASE_URL"].rsplit("/", 1)[0]
        database = f"gw_bench_{run}"
        with psycopg.connect(f"{server}/postgres", autocommit=True) as conn:
            conn.execute(f"CREATE DATABASE {database}")
        os.environ["DATABASE_URL"] = f"{server}/{database}"
    import django

    django.setup()
    from django.core.management import call_command

    call_command("migrate", verbosity=0)
    return database


def teardown(database: str | None, run: str) -> None:
    with contextlib.suppress(Exception):
        from django.db import connections

        connections.close_all()
    if database:
        import psycopg

        server = os.environ["DATABASE_URL"].rsplit("/", 1)[0]
        with psycopg.connect(f"{server}/postgres", autocommit=True) as conn:
            conn.execute(f"DROP DATABASE IF EXISTS {database} WITH (FORCE)")
    if os.environ.get("REDIS_URL"):
        import redis

        client = redis.Redis.from_url(os.environ["REDIS_URL"])
        for key in client.scan_iter(f"*bench{run}*"):
            client.delete(key)
        for key in client.scan_iter(f"*bench-{run}*"):
            client.delete(key)


def measure(tier: str, n: int, warmup: int, raises: Raises, standin: StandIn | None) -> dict:
    from django.contrib.auth import get_user_model
    from django.utils import timezone

    from agents import starting
    from agents.engine import Engine
    from agents.models import AgentDefinition, Grant, Suspension

    user, _ = get_user_model().objects.get_or_create(username="bench-operator")
    agent = AgentDefinition.objects.get(name=f"bench_{tier}")
    if tier == "grant":
        Grant.objects.create(
            agent_name=agent.name,
            tool_name="transfer_funds",
            conditions=[],
            max_uses=n + warmup + 10,
            created_by_name="bench",
            expires_at=timezone.now() + timedelta(hours=1),
        )
    wall: list[float] = []
    cpu: list[float] = []
    wrong: list[str] = []
    expected = "pending" if tier == "person" else "approved"
    for i in range(warmup + n):
        thread = starting.start_thread(agent, "Pay invoice 118", user)
        raises.last = None
        Engine().advance(thread.pk)
        assert raises.last is not None, "the engine raised nothing"
        w, c = raises.last
        if tier == "model":
            s = Suspension.objects.get(thread=thread)
            from agents.reviewing import verdicts

            before = standin.cpu
            w0, c0 = time.perf_counter(), time.process_time()
            verdicts.review(s.pk)
            w += time.perf_counter() - w0
            c += time.process_time() - c0 - (standin.cpu - before)
        s = Suspension.objects.get(thread=thread)
        by = getattr(s, "tier", "") or s.decided_by_name
        if s.status != expected:
            wrong.append(f"{s.status} ({by}: {s.reason})")
        if i >= warmup:
            wall.append(w)
            cpu.append(c)
    return {"wall": wall, "cpu": cpu, "wrong": wrong}


def line(tier: str, found: dict) -> str:
    wall, cpu = found["wall"], found["cpu"]

    def mean(values: list[float]) -> float:
        return sum(values) / len(values) * 1000

    text = (
        f"{tier:8} n {len(wall):4}  wall p50 {pctl(wall, 0.5):6.2f} ms  mean {mean(wall):6.2f} ms"
        f"  p95 {pctl(wall, 0.95):6.2f} ms   cpu p50 {pctl(cpu, 0.5):6.2f} ms"
        f"  mean {mean(cpu):6.2f} ms"
    )
    if found["wrong"]:
        text += f"   NOT AS EXPECTED: {len(found['wrong'])}, e.g. {found['wrong'][0]}"
    return text


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--requests", type=int, default=200, help="requests per tier")
    parser.add_argument("--warmup", type=int, default=10, help="requests per tier not counted")
    parser.add_argument(
        "--tiers", default=",".join(TIERS), help="comma-separated, of " + ", ".join(TIERS)
    )
    args = parser.parse_args()
    asked = [t.strip() for t in args.tiers.split(",") if t.strip()]
    unknown = [t for t in asked if t not in TIERS]
    if unknown:
        parser.error(f"unknown tiers: {', '.join(unknown)}")
    tiers = [t for t in asked if available(t)]
    for t in asked:
        if t not in tiers:
            print(f"{t}: skipped (this checkout has no such tier)")
    if not tiers:
        return
    standin = StandIn() if "model" in tiers else None
    if standin is not None:
        os.environ.update(ANTHROPIC_API_KEY="sk-ant-standin-key", ANTHROPIC_BASE_URL=standin.url)
    run = uuid.uuid4().hex[:8]
    tmp = Path(tempfile.mkdtemp(prefix="gw-bench-"))
    database = None
    try:
        database = setup_django(tmp, run)
        from agents.agentfiles import load

        agents = tmp / "agents.yaml"
        agents.write_text(
            "agents:\n" + "".join(AGENT.format(tier=t, policy=POLICIES[t]) for t in tiers)
        )
        load([agents])
        setup = (
            ("PostgreSQL + Redis" if os.environ.get("REDIS_URL") else "PostgreSQL")
            if database
            else "embedded (SQLite + filesystem broker)"
        )
        print(
            f"setup: {setup}; {args.requests} requests a tier, one at a time, after {args.warmup}"
        )
        raises = Raises()
        for tier in tiers:
            print(
                line(tier, measure(tier, args.requests, args.warmup, raises, standin)), flush=True
            )
    finally:
        teardown(database, run)
        if standin is not None:
            standin.stop()
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
