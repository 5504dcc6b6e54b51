"""Latency at the events socket, and one event fanned out to many open sockets.

    .venv/bin/python bench/sockets.py latency --cycles 200
        One socket open, CYCLES sequential runs: the time from a blocking call (the
        AGENT_SUSPENDED event's created_at, written by the worker when it raises the suspension)
        to that event's arrival at the socket, and from sending a decision to AGENT_RESUMED
        arriving at the socket. Targets: p50 ≤ 20 ms / p99 ≤ 100 ms, and p50 ≤ 30 ms.

    .venv/bin/python bench/sockets.py fanout --sockets 1000 --rounds 5
        SOCKETS sockets open on one daphne; each round starts a run, and every socket must
        receive its THREAD_STARTED event. Target: all of them within 1 s.

Starts its own gateway on a fresh database (bench/common.py); talks only to 127.0.0.1.
"""

import argparse
import asyncio
import json
import time
from datetime import datetime
from typing import Any

import websockets
from common import Gateway, summary

AGENT = """
agents:
  - name: bench
    model: scripted
    tools: [displayConfirmation]
    # The benchmark's one token starts each run and approves it: four eyes (the default for
    # blocking tools) would refuse that, so it is off for this agent only.
    policy: {four_eyes: false}
    script:
      - tool_calls:
          - {name: displayConfirmation, input: {action: benchmark}}
      - text: done
"""


def created(event: dict[str, Any]) -> float:
    return datetime.fromisoformat(event["created_at"]).timestamp()


async def open_socket(gw: Gateway, cookie: str) -> Any:
    return await websockets.connect(
        f"ws://127.0.0.1:{gw.port}/ws/events/?after=0",
        additional_headers={"Cookie": cookie},
        origin=f"http://127.0.0.1:{gw.port}",
        max_queue=None,
        open_timeout=60,
    )


async def settle(ws: Any) -> None:
    """Read until the socket has replayed what was there when it connected."""
    await ws.send(json.dumps({"type": "ping"}))
    while json.loads(await ws.recv()).get("type") != "pong":
        pass


async def latency(gw: Gateway, cycles: int) -> None:
    ws = await open_socket(gw, gw.session_cookie())
    await settle(ws)
    waiting: dict[tuple[str, str], asyncio.Future] = {}
    arrived: dict[tuple[str, str], tuple[float, dict]] = {}

    async def read() -> None:
        async for text in ws:
            now = time.time()
            event = json.loads(text)
            key = (event.get("thread"), event.get("type"))
            arrived[key] = (now, event)
            if key in waiting:
                waiting.pop(key).set_result(None)

    async def until(thread: str, type: str) -> tuple[float, dict]:
        if (thread, type) not in arrived:
            waiting[(thread, type)] = asyncio.get_running_loop().create_future()
            await asyncio.wait_for(waiting[(thread, type)], 30)
        return arrived.pop((thread, type))

    reader = asyncio.create_task(read())
    call = gw.call
    suspended, resumed, started, answered = [], [], [], []
    for _ in range(cycles):
        t0 = time.time()
        thread = (
            await asyncio.to_thread(
                call, "POST", "/api/threads", {"agent": "bench", "message": "go"}
            )
        )["id"]
        at, event = await until(thread, "AGENT_SUSPENDED")
        suspended.append(at - created(event))
        started.append(at - t0)
        t1 = time.time()
        path = f"/api/threads/{thread}/suspensions/{event['suspension']}/resume"
        await asyncio.to_thread(call, "POST", path, {"approved": True})
        answered.append(time.time() - t1)
        at, _ = await until(thread, "AGENT_RESUMED")
        resumed.append(at - t1)
        await until(thread, "THREAD_COMPLETED")
        for key in [k for k in arrived if k[0] == thread]:
            arrived.pop(key)
    reader.cancel()
    await ws.close()
    print(summary("suspended", suspended), "  (blocking call → AGENT_SUSPENDED at the socket)")
    print(summary("resumed", resumed), "  (decision POST sent → AGENT_RESUMED at the socket)")
    print(summary("started", started), "  (start POST sent → AGENT_SUSPENDED at the socket)")
    print(summary("answered", answered), "  (decision POST sent → its 202 received)")


async def fanout(gw: Gateway, count: int, rounds: int) -> None:
    cookie = gw.session_cookie()
    t0 = time.monotonic()
    sockets = []
    for i in range(0, count, 100):
        sockets += await asyncio.gather(
            *(open_socket(gw, cookie) for _ in range(min(100, count - i)))
        )
    await asyncio.gather(*(settle(ws) for ws in sockets))
    print(f"{count} sockets open and replayed in {time.monotonic() - t0:.1f} s")

    async def receive(ws: Any, thread: str) -> float:
        while True:
            event = json.loads(await ws.recv())
            if event.get("thread") == thread and event.get("type") == "THREAD_STARTED":
                return time.time() - created(event)

    worst, delays = [], []
    for r in range(rounds):
        thread = (
            await asyncio.to_thread(
                gw.call, "POST", "/api/threads", {"agent": "bench", "message": "go"}
            )
        )["id"]
        got = await asyncio.wait_for(asyncio.gather(*(receive(ws, thread) for ws in sockets)), 30)
        within = sum(1 for d in got if d <= 1.0)
        print(
            f"round {r + 1}: {len(got)}/{count} received, {within} within 1 s, "
            f"last after {max(got) * 1000:.0f} ms"
        )
        worst.append(max(got))
        delays += got
        await asyncio.sleep(1)
    print(summary("delivery", delays), "  (event created → received, every socket)")
    print(summary("last", worst), "  (per round: the last socket to receive it)")
    await asyncio.gather(*(ws.close() for ws in sockets))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="mode", required=True)
    lat = sub.add_parser("latency")
    lat.add_argument("--cycles", type=int, default=200)
    fan = sub.add_parser("fanout")
    fan.add_argument("--sockets", type=int, default=1000)
    fan.add_argument("--rounds", type=int, default=5)
    for p in (lat, fan):
        p.add_argument(
            "--workers", type=int, default=2, help="steps of runs at once (serve --concurrency)"
        )
    args = parser.parse_args()
    with Gateway(AGENT, ["--concurrency", str(args.workers)]) as gw:
        print(f"setup: {gw.setup}")
        if args.mode == "latency":
            asyncio.run(latency(gw, args.cycles))
        else:
            asyncio.run(fanout(gw, args.sockets, args.rounds))


if __name__ == "__main__":
    main()
