"""Python function calls per step of one approval cycle, in one process: a figure that does not
drift with the machine's speed (bench/cycles.py's CPU times move by a third from one run to
the next here), for comparing two versions of the hot path.

The steps are tests/agents/test_cycle_queries.py's: the start POST and the decision POST
through Django's test client, the worker's two steps through the engine, with the database
and broker of the run. 20 untimed cycles, then 10 under cProfile (its count of calls), then
CYCLES timed ones (process CPU, which moves with the machine). Run with pytest, the tests'
fixtures loaded as a plugin, and the benchmarks' settings (no rate limits, no pending cap):

    RATE_LIMIT_RUNS= RATE_LIMIT_USER_RUNS= RATE_LIMIT_DECISIONS= RATE_LIMIT_USER_DECISIONS= \\
    MAX_PENDING_PER_AGENT=0 DATABASE_URL=postgres://root@127.0.0.1:5432/gw_calls \\
    REDIS_URL=redis://127.0.0.1:6379/7 \\
    .venv/bin/python -m pytest -p tests.conftest bench/calls.py -q -s -p no:cacheprovider
"""

import cProfile
import os
import pstats
import time
from typing import Any

import pytest

from agents.engine import engine
from agents.models import Suspension
from tests.agents.test_cycle_queries import AGENT
from tests.conftest import Api, operator

STEPS = ("start", "suspend", "decide", "resume")


@pytest.mark.django_db(transaction=True)
def test_calls_per_step(users: dict[str, Any], load_agents: Any) -> None:
    load_agents(AGENT)
    starter = Api(operator())
    reviewer = Api(users["reviewer"])
    cycles = int(os.environ.get("CYCLES", "100"))
    cpu = dict.fromkeys(STEPS, 0.0)
    calls = dict.fromkeys(STEPS, 0)

    def step(name: str, work: Any, mode: str) -> Any:
        if mode == "calls":
            profile = cProfile.Profile()
            result = profile.runcall(work)
            calls[name] += pstats.Stats(profile).total_calls
            return result
        began = time.process_time()
        result = work()
        if mode == "cpu":
            cpu[name] += time.process_time() - began
        return result

    def cycle(mode: str) -> None:
        body = {"agent": "bench", "message": "go"}
        response = step("start", lambda: starter.post("/api/threads", body), mode)
        assert response.status_code == 201, response.content
        thread = response.json()["id"]
        step("suspend", lambda: engine.advance(thread), mode)
        pk = Suspension.objects.filter(thread_id=thread).values_list("id", flat=True).get()
        path = f"/api/threads/{thread}/suspensions/{pk}/resume"
        step("decide", lambda: reviewer.post(path, {"approved": True}), mode)
        step("resume", lambda: engine.advance(thread), mode)

    for _ in range(20):
        cycle("warm")
    for _ in range(10):
        cycle("calls")
    for _ in range(cycles):
        cycle("cpu")
    print()
    print("calls per step: " + ", ".join(f"{s} {calls[s] / 10:.0f}" for s in STEPS), end="")
    print(f"; cycle {sum(calls.values()) / 10:.0f}")
    print("CPU per step:   " + ", ".join(f"{s} {cpu[s] / cycles * 1000:.1f} ms" for s in STEPS))
