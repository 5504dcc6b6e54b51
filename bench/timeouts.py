"""How late deadlines are applied: SUSPENSION_TIMEOUT's time minus the suspension's expires_at.

Starts RATE runs per second for SECONDS seconds on an agent whose confirmation times out after
TIMEOUT seconds, so deadlines fall all through the run while the worker is busy with new
runs, then waits for every suspension to time out and reports how late each was applied.
Target: at most 1 s late.

    .venv/bin/python bench/timeouts.py --rate 20 --seconds 10 --timeout 2

Starts its own gateway on a fresh database (bench/common.py); talks only to 127.0.0.1.
"""

import argparse
import time
from datetime import datetime

from common import Gateway, summary

AGENT = """
agents:
  - name: bench
    model: scripted
    tools: [displayConfirmation]
    tool_overrides:
      displayConfirmation: {{timeout: {timeout}, on_timeout: reject}}
    script:
      - tool_calls:
          - {{name: displayConfirmation, input: {{action: benchmark}}}}
      - text: done
"""


def all_events(gw: Gateway) -> list[dict]:
    found, after = [], 0
    while True:
        page = gw.call("GET", f"/api/events?after={after}")
        if not page["events"]:
            return found
        found += page["events"]
        after = page["last_id"]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rate", type=float, default=20, help="runs started per second")
    parser.add_argument("--seconds", type=float, default=10)
    parser.add_argument("--timeout", type=int, default=2, help="the confirmation's deadline (s)")
    parser.add_argument(
        "--workers", type=int, default=2, help="steps of runs at once (serve --concurrency)"
    )
    args = parser.parse_args()
    with Gateway(AGENT.format(timeout=args.timeout), ["--concurrency", str(args.workers)]) as gw:
        print(f"setup: {gw.setup}")
        cpu_before = gw.cpu_seconds()
        started = 0
        t0 = time.monotonic()
        while time.monotonic() - t0 < args.seconds:
            gw.call("POST", "/api/threads", {"agent": "bench", "message": "go"})
            started += 1
            time.sleep(max(0.0, t0 + started / args.rate - time.monotonic()))
        deadline = time.monotonic() + args.timeout + 60
        while time.monotonic() < deadline:
            events = all_events(gw)
            expired = [e for e in events if e["type"] == "SUSPENSION_TIMEOUT"]
            if len(expired) >= started:
                break
            time.sleep(1)
        expires = {
            e["suspension"]: datetime.fromisoformat(e["payload"]["expires_at"])
            for e in events
            if e["type"] == "AGENT_SUSPENDED"
        }
        late = [
            (datetime.fromisoformat(e["created_at"]) - expires[e["suspension"]]).total_seconds()
            for e in expired
        ]
        print(f"runs started: {started}; suspensions: {len(expires)}; timed out: {len(late)}")
        print(summary("late", late), "  (SUSPENSION_TIMEOUT created − expires_at)")
        print(f"applied more than 1 s late: {sum(1 for v in late if v > 1.0)}")
        used = {k: v - cpu_before.get(k, 0.0) for k, v in gw.cpu_seconds().items()}
        print(
            f"CPU per run, ms (the load and the deadlines, {len(late)} runs): "
            + ", ".join(f"{k} {1000 * v / max(started, 1):.1f}" for k, v in sorted(used.items()))
        )


if __name__ == "__main__":
    main()
