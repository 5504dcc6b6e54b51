"""Redis restarted (persistence off, then on) and PostgreSQL restarted in the middle of runs.

Nothing is lost, nothing runs twice, the gateway recovers by itself, and no 2xx answers a
decision that was not stored.
"""

import asyncio
import json
import random
import threading
import time
from concurrent.futures import ThreadPoolExecutor

from websockets.asyncio.client import connect

from agents.events import EVENTS_GROUP
from tests.faults.harness import Gateway, wait_until
from tests.faults.history import Answer, Figures, check

RUNS = 30


def send(gw: Gateway, row: tuple, decision: dict, answers: list[Answer]) -> int | None:
    """Send one decision; a refused or dropped connection is None (nothing was answered)."""
    sid, thread, _ = row
    try:
        status, body = gw.call(
            "POST", f"/api/threads/{thread}/suspensions/{sid}/resume", decision, timeout=60
        )
    except OSError:
        return None
    answers.append(Answer(sid, status, body, decision))
    return status


def settle(gw: Gateway, suspended: list[tuple], answers: list[Answer]) -> None:
    """What the client would do: send again every decision that did not get a 2xx."""
    got = {a.suspension for a in answers if 200 <= a.status < 300}
    for row in suspended:
        if row[0] not in got:
            decision = {"approved": True, "reason": "sent again"}
            status = wait_until(
                lambda row=row, decision=decision: send(gw, row, decision, answers),
                60,
                "the gateway to take a decision again",
                0.5,
            )
            assert status in (200, 202, 409), status


def api_answers(gw: Gateway) -> bool:
    try:
        return gw.call("GET", "/api/suspensions?status=pending&limit=1", timeout=5)[0] == 200
    except OSError:
        return False


def redis_outage(gw: Gateway, figures: Figures) -> tuple[list[str], list[Answer]]:
    """Kill Redis, decide and start runs while it is down, start it again; the runs, and
    what the client was answered."""
    threads = gw.start_threads("pay", RUNS)
    suspended = gw.wait_suspended(threads)
    answers: list[Answer] = []
    half = RUNS // 2
    with ThreadPoolExecutor(8) as pool:
        list(
            pool.map(
                lambda r: send(gw, r, {"approved": True, "reason": "before"}, answers),
                suspended[:half],
            )
        )
    gw.redis.stop()
    down_at = time.monotonic()
    rng = random.Random(5)
    with ThreadPoolExecutor(8) as pool:
        list(
            pool.map(
                lambda r: send(
                    gw, r, {"approved": rng.random() < 0.7, "reason": "redis down"}, answers
                ),
                suspended[half:],
            )
        )
    # Runs started while the broker is down: a 201 is a stored run that must still happen.
    started = []
    for i in range(5):
        try:
            status, body = gw.call(
                "POST",
                "/api/threads",
                {"agent": "pay", "message": f"redis down {i}"},
                token=gw.starter_token,
            )
        except OSError:
            continue
        if status == 201:
            started.append(body["id"])
        else:
            figures.extra[f"start while redis down: {status}"] = body.get("error")
    time.sleep(max(0.0, 3 - (time.monotonic() - down_at)))
    gw.redis.start()
    up_at = time.monotonic()
    figures.faults += 1
    during = [a for a in answers if a.sent.get("reason") == "redis down"]
    figures.extra["answers while redis down"] = " ".join(sorted({str(a.status) for a in during}))
    settle(gw, suspended, answers)
    if started:
        gw.wait_suspended(started, timeout=90)
        more = gw.sql(
            "SELECT id::text, thread_id::text, expires_at FROM agents_suspension"
            " WHERE thread_id = ANY(%s::uuid[])",
            started,
        )
        settle(gw, more, answers)
    everything = threads + started
    gw.wait_finished(everything, timeout=120)
    figures.recovery.append(time.monotonic() - up_at)
    restarted = {p.name: p.restarts for p in gw.processes if p.restarts}
    if restarted:
        figures.extra["restarted by the supervisor (so far)"] = " ".join(
            f"{name} {n}" for name, n in sorted(restarted.items())
        )
    return everything, answers


def test_redis_restarted_without_persistence(gw: Gateway) -> None:
    figures = Figures("redis restart, persistence off")
    threads, answers = redis_outage(gw, figures)
    with gw.db() as conn:
        check(conn, figures, threads, answers)
    figures.report()


def test_redis_restarted_with_persistence(gw: Gateway) -> None:
    figures = Figures("redis restart, persistence on")
    gw.redis.stop()
    gw.redis.wipe()
    gw.redis.start(persistent=True)
    figures.faults += 1
    try:
        # Decisions queued while no worker runs are in Redis alone when it is killed.
        threads = gw.start_threads("pay", RUNS)
        suspended = gw.wait_suspended(threads)
        gw.worker.terminate()
        answers: list[Answer] = []
        with ThreadPoolExecutor(8) as pool:
            list(
                pool.map(
                    lambda r: send(gw, r, {"approved": True, "reason": "queued"}, answers),
                    suspended,
                )
            )
        gw.redis.stop()
        figures.faults += 1
        gw.redis.start()
        up_at = time.monotonic()
        gw.worker.start()
        gw.wait_finished(threads, timeout=120)
        figures.recovery.append(time.monotonic() - up_at)
        # The same outage as without persistence, with it.
        more, more_answers = redis_outage(gw, figures)
        with gw.db() as conn:
            check(conn, figures, threads + more, answers + more_answers)
    finally:
        gw.redis.stop()
        gw.redis.wipe()
        gw.redis.start(persistent=False)
    figures.report()


def test_postgres_restarted_mid_flow(gw: Gateway) -> None:
    figures = Figures("postgres restart mid-flow")
    threads = gw.start_threads("pay", 2 * RUNS)
    suspended = gw.wait_suspended(threads)
    answers: list[Answer] = []
    first, second = suspended[:RUNS], suspended[RUNS:]
    recovery = []

    # 1. A crash (immediate stop) while decisions arrive.
    def decide(rows: list[tuple], spread: float) -> None:
        with ThreadPoolExecutor(8) as pool:
            list(
                pool.map(
                    lambda r: (
                        time.sleep(random.uniform(0, spread)),
                        send(gw, r, {"approved": True, "reason": "pg"}, answers),
                    ),
                    rows,
                )
            )

    sender = threading.Thread(target=decide, args=(first, 3.0))
    sender.start()
    time.sleep(1)
    gw.pg.stop("immediate")
    time.sleep(2)
    gw.pg.start()
    up_at = time.monotonic()
    figures.faults += 1
    sender.join()
    wait_until(lambda: api_answers(gw), 30, "the API to answer after PostgreSQL restarted")
    recovery.append(time.monotonic() - up_at)
    settle(gw, first, answers)

    # 2. A clean restart (fast stop) while workers resume the second half.
    decide(second, 0.0)
    gw.pg.stop("fast")
    time.sleep(1)
    gw.pg.start()
    up_at = time.monotonic()
    figures.faults += 1
    settle(gw, second, answers)
    gw.wait_finished(threads, timeout=120)
    recovery.append(time.monotonic() - up_at)
    # The web process recovers by itself: a new run is taken promptly, not after its
    # connection pool has waited out a reconnect backoff.
    began = time.monotonic()
    try:
        code, body = gw.call(
            "POST", "/api/threads", {"agent": "pay", "message": "after"}, 10, gw.starter_token
        )
    except OSError as e:
        code, body = None, str(e)
    took = time.monotonic() - began
    if code != 201 or took > 5:
        figures.violations.append(
            f"a new run {took:.1f}s after the clean restart answered {code} {body}"
        )
    else:
        threads.append(body["id"])
        settle(gw, gw.wait_suspended([body["id"]]), answers)
        gw.wait_finished(threads, timeout=60)

    bad = [a for a in answers if a.status >= 500]
    figures.extra = {
        "5xx while down": len(bad),
        "recovery": "API answering after the crash, every run ended after the clean restart",
    }
    figures.recovery = recovery
    for process in gw.processes:
        if not process.alive():
            figures.violations.append(f"{process.name} exited when PostgreSQL restarted")
    with gw.db() as conn:
        check(conn, figures, threads, answers)
    figures.report()


def test_the_sockets_hear_wake_ups_again_after_redis_restarts(gw: Gateway) -> None:
    """The server's event hub listens on the channel layer (Redis pub/sub): after Redis comes
    back it subscribes again, so the sockets are woken by events again instead of waiting for
    the safety poll. Proven by Redis itself: the events group has a subscriber again."""
    import redis

    client = redis.Redis.from_url(gw.redis.url, socket_timeout=2)
    group = f"{gw.env['GATEWAY_PREFIX']}__group__{EVENTS_GROUP}"

    def listened() -> bool:
        try:
            return dict(client.pubsub_numsub(group)).get(group.encode(), 0) >= 1
        except redis.RedisError:
            return False

    async def scenario() -> None:
        headers = {"Authorization": f"Bearer {gw.token}"}
        start = gw.sql("SELECT coalesce(max(id), 0) FROM agents_event")[0][0]
        async with connect(f"{gw.ws_url}?after={start}", additional_headers=headers) as ws:
            await asyncio.to_thread(wait_until, listened, 20, "the hub to subscribe")
            gw.redis.stop()
            await asyncio.sleep(2)
            gw.redis.start()
            await asyncio.to_thread(wait_until, listened, 30, "the hub to subscribe again")
            [thread] = await asyncio.to_thread(gw.start_threads, "pay", 1)
            async with asyncio.timeout(30):
                while True:
                    message = json.loads(await ws.recv())
                    if message.get("thread") == thread:
                        return  # the run's first event reached the socket

    asyncio.run(scenario())
