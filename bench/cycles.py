"""Full approval cycles per second over HTTP: start → suspended → decision → resumed → completed.

CLIENTS concurrent clients each run cycles for SECONDS seconds: POST /api/threads, wait for
its AGENT_SUSPENDED on the events socket (one socket, shared, as an integration would hold
it), POST the approval, wait for THREAD_COMPLETED. Reports cycles per second and the latency
of each half. Target: at least 80 cycles per second.

    .venv/bin/python bench/cycles.py --clients 16 --seconds 20 --workers 2

Starts its own gateway on a fresh database (bench/common.py); talks only to 127.0.0.1.
"""

import argparse
import asyncio
import json
import time
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from common import Gateway, summary
from sockets import AGENT, open_socket, settle


async def run(gw: Gateway, clients: int, seconds: float, warmup: int) -> None:
    loop = asyncio.get_running_loop()
    loop.set_default_executor(ThreadPoolExecutor(max_workers=clients + 4))
    ws = await open_socket(gw, gw.session_cookie())
    await settle(ws)
    waiting: dict[tuple[str, str], asyncio.Future] = {}
    arrived: dict[tuple[str, str], dict] = {}

    async def read() -> None:
        async for text in ws:
            event = json.loads(text)
            key = (event.get("thread"), event.get("type"))
            if key in waiting:
                waiting.pop(key).set_result(event)
            elif key[1] in ("AGENT_SUSPENDED", "THREAD_COMPLETED", "THREAD_FAILED"):
                arrived[key] = event

    async def until(thread: str, type: str) -> dict[str, Any]:
        if (thread, type) in arrived:
            return arrived.pop((thread, type))
        waiting[(thread, type)] = loop.create_future()
        try:
            return await asyncio.wait_for(waiting[(thread, type)], 60)
        except TimeoutError:
            waiting.pop((thread, type), None)
            state = await asyncio.to_thread(gw.call, "GET", f"/api/threads/{thread}")
            trail = await asyncio.to_thread(gw.call, "GET", f"/api/events?thread={thread}")
            seen = [(e["id"], e["type"]) for e in trail["events"]]
            raise RuntimeError(
                f"no {type} for thread {thread} at the socket in 60 s; the thread is "
                f"{state['status']}, its events: {seen}"
            ) from None

    out: dict[str, list[float]] = {"suspend": [], "resume": [], "cycle": []}

    async def cycle() -> tuple[float, float, float]:
        t0 = time.monotonic()
        body = {"agent": "bench", "message": "go"}
        thread = (await asyncio.to_thread(gw.call, "POST", "/api/threads", body))["id"]
        event = await until(thread, "AGENT_SUSPENDED")
        t1 = time.monotonic()
        path = f"/api/threads/{thread}/suspensions/{event['suspension']}/resume"
        await asyncio.to_thread(gw.call, "POST", path, {"approved": True})
        await until(thread, "THREAD_COMPLETED")
        return t0, t1, time.monotonic()

    async def client(stop: float) -> None:
        while time.monotonic() < stop:
            t0, t1, t2 = await cycle()
            out["suspend"].append(t1 - t0)
            out["resume"].append(t2 - t1)
            out["cycle"].append(t2 - t0)

    async def warm(cycles: int) -> None:
        for _ in range(cycles):
            await cycle()

    reader = asyncio.create_task(read())
    # Untimed cycles first, as the peer's benchmark runs (its --warmup, 20): each process's
    # first requests and tasks pay once for what later ones reuse (imports, the pool's
    # connections, Celery's producer and result backend, statements compiled once).
    share = [warmup // clients + (i < warmup % clients) for i in range(clients)]
    await asyncio.gather(*(warm(n) for n in share))
    stop = time.monotonic() + seconds
    before = gw.cpu_seconds()
    mine = time.process_time()
    start = time.monotonic()
    await asyncio.gather(*(client(stop) for _ in range(clients)))
    elapsed = time.monotonic() - start
    after = gw.cpu_seconds()
    mine = time.process_time() - mine
    reader.cancel()
    await ws.close()
    n = len(out["cycle"])
    print(f"clients: {clients}; {elapsed:.1f} s")
    print(f"cycles: {n}  ({n / elapsed:.1f} per second)")
    print(summary("suspend", out["suspend"]), "  (start POST → AGENT_SUSPENDED at the socket)")
    print(summary("resume", out["resume"]), "  (AGENT_SUSPENDED → THREAD_COMPLETED)")
    print(summary("cycle", out["cycle"]))
    if n:
        spent = {kind: after[kind] - before.get(kind, 0.0) for kind in after}
        parts = ", ".join(f"{kind} {spent[kind] / n * 1000:.1f}" for kind in sorted(spent))
        print(f"CPU per cycle: {sum(spent.values()) / n * 1000:.1f} ms ({parts})")
        # The benchmark's own client shares the machine's two cores; not counted above.
        print(f"this client's CPU per cycle: {mine / n * 1000:.1f} ms (not counted above)")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--clients", type=int, default=16)
    parser.add_argument("--seconds", type=float, default=20)
    parser.add_argument(
        "--workers", type=int, default=2, help="steps of runs at once (serve --concurrency)"
    )
    parser.add_argument("--web", type=int, default=1, help="daphne processes")
    parser.add_argument(
        "--warmup", type=int, default=20, help="untimed cycles first (the peer's default, 20)"
    )
    parser.add_argument(
        "--profile", metavar="FILE", help="py-spy the server meanwhile; collapsed stacks to FILE"
    )
    args = parser.parse_args()
    serve = ["--concurrency", str(args.workers)]
    if args.web != 1:
        serve += ["--web-processes", str(args.web)]
    with Gateway(AGENT, serve) as gw:
        print(f"setup: {gw.setup}; worker steps at once: {args.workers}; daphne: {args.web}")
        with gw.profiled(args.profile):
            asyncio.run(run(gw, args.clients, args.seconds, args.warmup))


if __name__ == "__main__":
    main()
