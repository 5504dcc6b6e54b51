"""Sockets: one drops and reconnects, one reads nothing while 2,000 events pass.

Both must end with exactly the events the table holds after their cursor, in id order, each
once; the server's memory stays bounded meanwhile; and the state the events describe equals
a REST fetch.
"""

import asyncio
import json
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from websockets.asyncio.client import connect
from websockets.exceptions import ConnectionClosed

from tests.faults.harness import Gateway
from tests.faults.history import Answer, Figures, check

EVENTS = 2000
PER_RUN = 9  # THREAD_STARTED ... THREAD_COMPLETED of one approved `pay` run
GROWTH_LIMIT_MIB = 64


def last_event(gw: Gateway) -> int:
    return gw.sql("SELECT coalesce(max(id), 0) FROM agents_event")[0][0]


def cycles(gw: Gateway, runs: int) -> tuple[list[str], list[Answer]]:
    """Start runs and approve each as it suspends, until all have ended."""
    threads = gw.start_threads("pay", runs)
    suspended = gw.wait_suspended(threads)

    def approve(row: tuple) -> Answer:
        sid, thread, _ = row
        decision = {"approved": True, "reason": "socket test"}
        status, body = gw.call("POST", f"/api/threads/{thread}/suspensions/{sid}/resume", decision)
        return Answer(sid, status, body, decision)

    with ThreadPoolExecutor(8) as pool:
        answers = list(pool.map(approve, suspended))
    gw.wait_finished(threads, timeout=120)
    return threads, answers


async def read_until(ws: Any, last: int, got: list[dict], timeout: float = 60) -> None:
    """Receive until the event `last` arrived; heartbeats are skipped."""
    deadline = time.monotonic() + timeout
    while not got or got[-1]["id"] < last:
        left = deadline - time.monotonic()
        if left <= 0:
            raise AssertionError(
                f"socket stopped at {got[-1]['id'] if got else None}, expected up to {last}"
            )
        message = json.loads(await asyncio.wait_for(ws.recv(), left))
        if "id" in message:
            got.append(message)


def exact(gw: Gateway, after: int, last: int, got: list[dict], figures: Figures) -> None:
    """The socket's events are the table's events (after, last], in order, each once."""
    rows = gw.sql("SELECT id FROM agents_event WHERE id > %s AND id <= %s ORDER BY id", after, last)
    want = [r[0] for r in rows]
    ids = [m["id"] for m in got]
    if ids != want:
        dup = len(ids) - len(set(ids))
        missing = sorted(set(want) - set(ids))
        figures.duplicated += dup
        figures.lost += len(missing)
        out_of_order = ids != sorted(ids)
        figures.violations.append(
            f"socket: {len(ids)} events, table {len(want)}; {dup} repeated, "
            f"{len(missing)} missing (first {missing[:5]}), out of order: {out_of_order}"
        )


def compare_with_rest(gw: Gateway, threads: list[str], got: list[dict], figures: Figures) -> None:
    """Thread and suspension states rebuilt from the events equal what the API says now."""
    thread_state: dict[str, str] = {}
    suspension_state: dict[str, str] = {}
    for m in got:
        status = (m.get("payload") or {}).get("status")
        if not status:
            continue
        if m["type"].startswith("THREAD_") and m["thread"]:
            thread_state[m["thread"]] = status
        if m["type"].startswith("SUSPENSION_") or m["type"] == "AGENT_SUSPENDED":
            suspension_state[m["suspension"]] = status
    for thread in threads:
        code, body = gw.call("GET", f"/api/threads/{thread}")
        if code != 200 or body["status"] != thread_state.get(thread):
            figures.violations.append(
                f"thread {thread}: events say {thread_state.get(thread)}, REST {body.get('status')}"
            )
    sids = [s for s in suspension_state if s]
    for sid in sids:
        code, body = gw.call("GET", f"/api/suspensions/{sid}")
        if code != 200 or body["status"] != suspension_state[sid]:
            figures.violations.append(
                f"suspension {sid}: events say {suspension_state[sid]}, REST {body.get('status')}"
            )


def test_a_socket_that_drops_and_reconnects(gw: Gateway) -> None:
    figures = Figures("socket drops and reconnects")
    start = last_event(gw)
    headers = {"Authorization": f"Bearer {gw.token}"}
    got: list[dict] = []
    result: dict[str, Any] = {}

    async def first() -> None:
        async with connect(f"{gw.ws_url}?after={start}", additional_headers=headers) as ws:
            while len(got) < 60:
                message = json.loads(await ws.recv())
                if "id" in message:
                    got.append(message)
            ws.transport.abort()  # the network goes away: no closing handshake

    runner = threading.Thread(target=lambda: result.update(c=cycles(gw, 40)))
    runner.start()
    asyncio.run(first())
    figures.faults = 1
    time.sleep(1.0)  # events go on meanwhile
    dropped_at = got[-1]["id"]

    async def second() -> float:
        began = time.monotonic()
        async with connect(f"{gw.ws_url}?after={dropped_at}", additional_headers=headers) as ws:
            runner.join()
            await read_until(ws, last_event(gw), got)
        return time.monotonic() - began

    figures.recovery = [asyncio.run(second())]
    threads, answers = result["c"]
    exact(gw, start, got[-1]["id"], got, figures)
    compare_with_rest(gw, threads, got, figures)
    with gw.db() as conn:
        check(conn, figures, threads, answers)
    figures.extra = {"events": len(got), "dropped after": 60}
    figures.report()


def test_a_socket_that_reads_nothing_while_2000_events_pass(gw: Gateway) -> None:
    figures = Figures("socket reads nothing for 2,000 events")
    figures.faults = 1  # a reader that stalls
    start = last_event(gw)
    headers = {"Authorization": f"Bearer {gw.token}"}
    got: list[dict] = []
    rss = [gw.rss_kib(gw.web)]

    async def run() -> tuple[list[str], list[Answer]]:
        # max_queue=1: the client stops reading its TCP socket, so the server's writes back up.
        async with connect(
            f"{gw.ws_url}?after={start}", additional_headers=headers, max_queue=1
        ) as ws:
            loop = asyncio.get_running_loop()
            sample = True

            async def sampler() -> None:
                while sample:
                    rss.append(gw.rss_kib(gw.web))
                    await asyncio.sleep(0.5)

            sampling = asyncio.create_task(sampler())
            threads, answers = await loop.run_in_executor(None, cycles, gw, EVENTS // PER_RUN + 10)
            sample = False
            await sampling
            try:
                await read_until(ws, last_event(gw), got, timeout=120)
                return threads, answers
            except ConnectionClosed as e:
                # The server may drop a client that stopped answering its pings; the client
                # comes back with its cursor, as a browser does.
                figures.extra["dropped by the server"] = f"{e} after {len(got)} events"
        after = got[-1]["id"] if got else start
        async with connect(f"{gw.ws_url}?after={after}", additional_headers=headers) as ws:
            await read_until(ws, last_event(gw), got, timeout=120)
        return threads, answers

    threads, answers = asyncio.run(run())
    growth = (max(rss) - rss[0]) / 1024
    exact(gw, start, got[-1]["id"], got, figures)
    if len(got) < EVENTS:
        figures.violations.append(f"only {len(got)} events passed, not {EVENTS}")
    if growth > GROWTH_LIMIT_MIB:
        figures.violations.append(f"daphne grew by {growth:.0f} MiB for one idle socket")
    compare_with_rest(gw, threads, got, figures)
    with gw.db() as conn:
        check(conn, figures, threads, answers)
    figures.extra.update(events=len(got), daphne_rss_growth=f"{growth:.1f} MiB")
    figures.report()
