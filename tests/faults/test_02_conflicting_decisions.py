"""Twenty concurrent, conflicting decisions on each of many suspensions, then replays."""

import threading
from concurrent.futures import ThreadPoolExecutor

from tests.faults.harness import Gateway
from tests.faults.history import Answer, Figures, check

SUSPENSIONS = 40
RACERS = 20
AT_ONCE = 2  # suspensions raced together
EDIT = {"from_account": "ACC-1", "to_account": "ACC-3", "amount": 5, "currency": "EUR"}


def decisions(n: int) -> list[dict]:
    """Twenty decisions, most of them different: approvals, rejections, edited approvals."""
    out = []
    for i in range(RACERS):
        kind = i % 3
        if kind == 0:
            out.append({"approved": True, "reason": f"ok {n}"})
        elif kind == 1:
            out.append({"approved": False, "reason": f"no {n}.{i % 2}"})
        else:
            out.append({"approved": True, "reason": f"edited {n}", "modifiedArgs": EDIT})
    return out


def same(sent: dict, outcome: dict) -> bool:
    return (
        outcome.get("approved") == sent["approved"]
        and (outcome.get("reason") or "") == sent.get("reason", "")
        and outcome.get("modifiedArgs") == sent.get("modifiedArgs")
    )


def test_conflicting_decisions_and_replays(gw: Gateway) -> None:
    figures = Figures("20 concurrent conflicting decisions")
    threads = gw.start_threads("pay", SUSPENSIONS)
    suspended = gw.wait_suspended(threads)
    answers: list[Answer] = []

    def race(batch: list[tuple]) -> list[Answer]:
        barrier = threading.Barrier(RACERS * len(batch))

        def one(item: tuple) -> Answer:
            sid, thread, decision = item
            barrier.wait()
            status, body = gw.call(
                "POST", f"/api/threads/{thread}/suspensions/{sid}/resume", decision
            )
            return Answer(sid, status, body, decision)

        items = [(sid, thread, d) for n, (sid, thread, _) in enumerate(batch) for d in decisions(n)]
        with ThreadPoolExecutor(len(items)) as pool:
            return list(pool.map(one, items))

    for i in range(0, len(suspended), AT_ONCE):
        answers += race(suspended[i : i + AT_ONCE])

    by_suspension: dict[str, list[Answer]] = {}
    for a in answers:
        by_suspension.setdefault(a.suspension, []).append(a)
    v = figures.violations
    replays = []
    for sid, thread, _ in suspended:
        got = by_suspension[sid]
        won = [a for a in got if a.status == 202]
        if len(won) != 1:
            v.append(f"{sid}: {len(won)} answers 202 of {RACERS}")
            continue
        winner = won[0].sent
        for a in got:
            if a.status == 200 and not same(a.sent, winner):
                v.append(f"{sid}: 200 for {a.sent}, but {winner} won")
            elif a.status == 409 and same(a.sent, winner):
                v.append(f"{sid}: 409 for the winning decision {a.sent}")
            elif a.status not in (200, 202, 409):
                v.append(f"{sid}: answered {a.status} {a.body}")
        other = (
            {"approved": False, "reason": "replayed rejection"}
            if winner["approved"]
            else {"approved": True, "reason": "replayed approval"}
        )
        replays += [(sid, thread, winner, 200), (sid, thread, other, 409)]

    gw.wait_finished(threads, timeout=60)

    def replay(item: tuple) -> Answer:
        sid, thread, decision, expected = item
        status, body = gw.call("POST", f"/api/threads/{thread}/suspensions/{sid}/resume", decision)
        if status != expected:
            v.append(f"{sid}: replay of {decision} answered {status}, not {expected}")
        return Answer(sid, status, body, {})

    with ThreadPoolExecutor(8) as pool:
        answers += list(pool.map(replay, replays))
    with gw.db() as conn:
        check(conn, figures, threads, answers)
    figures.extra = {
        "requests": len(answers),
        "approved": sum(1 for a in answers if a.status == 202 and a.sent["approved"]),
        "rejected": sum(1 for a in answers if a.status == 202 and not a.sent["approved"]),
    }
    figures.report()
