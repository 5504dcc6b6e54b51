"""Our full cycle against the peer's, side by side: the peer (LangGraph + its PostgreSQL
checkpointer, in-process; ../shared/peers/run.sh), then bench/cycles.py, then the peer again,
one after the other on this machine. Prints the three and the ratio of ours to the peer's
best. `make bench-compare` runs it on PostgreSQL + Redis.

    .venv/bin/python bench/compare.py [--peers ../shared/peers] [--clients 8 --web 1 --workers 2]
"""

import argparse
import json
import os
import re
import subprocess
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent


def peer(peers: Path, n: int) -> dict[str, float]:
    """Cycles per second of each peer configuration (the median of its runs)."""
    print(f"-- the peer: {peers / 'run.sh'} --n {n}", flush=True)
    done = subprocess.run(
        [
            str(peers / "run.sh"),
            "--n",
            str(n),
            "--runs",
            "1",
            "--configs",
            "postgres_seq,postgres_async",
        ],
        check=True,
        capture_output=True,
        text=True,
    )
    line = [row for row in done.stdout.splitlines() if row.startswith("{")][-1]
    results = json.loads(line)["results"]
    figures = {name: r["cycles_per_s"]["median"] for name, r in results.items()}
    for name, rate in figures.items():
        print(f"   {name}: {rate:.1f} cycles/s")
    return figures


def ours(args: argparse.Namespace) -> float:
    command = [
        sys.executable,
        str(HERE / "cycles.py"),
        "--clients",
        str(args.clients),
        "--seconds",
        str(args.seconds),
        "--web",
        str(args.web),
        "--workers",
        str(args.workers),
    ]
    print("-- ours:", " ".join(command[1:]), flush=True)
    done = subprocess.run(command, check=True, capture_output=True, text=True)
    for row in done.stdout.splitlines():
        if not row.startswith("server log"):
            print("  ", row)
    return float(re.search(r"cycles: \d+\s+\(([\d.]+) per second\)", done.stdout).group(1))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--peers", type=Path, default=HERE.parent.parent / "shared" / "peers")
    parser.add_argument("--n", type=int, default=300, help="the peer's cycles per run")
    # One daphne and two worker processes suit the 2-core machine best (bench/README.md: 20.4
    # cycles/s against 15.7 with 16 clients, 2 daphne and 4 workers, the same hour).
    parser.add_argument("--clients", type=int, default=8)
    parser.add_argument("--seconds", type=float, default=20)
    parser.add_argument("--web", type=int, default=1)
    parser.add_argument("--workers", type=int, default=2)
    args = parser.parse_args()
    if not (args.peers / "run.sh").exists():
        sys.exit(f"no peer benchmark at {args.peers} (give its folder with --peers)")
    if not os.environ.get("DATABASE_URL"):
        print("note: DATABASE_URL is not set, so ours runs on the embedded setup", flush=True)
    before = peer(args.peers, args.n)
    mine = ours(args)
    after = peer(args.peers, args.n)
    best = max([*before.values(), *after.values()])
    print(f"peer best {best:.1f} cycles/s; ours {mine:.1f} cycles/s; ratio {mine / best:.2f}")


if __name__ == "__main__":
    main()
