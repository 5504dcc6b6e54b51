"""What `make run` costs a machine: its processes' memory after the walk-through, and their
CPU while nothing happens.

Starts `make run` (the embedded default unless DATABASE_URL is set) on a fresh data folder
and a free port, runs docs/getting-started.md's walk-through against it as written (the
token pasted in), waits SETTLE seconds, then reads every process under `make run`: resident
memory (RSS) and proportional set size (PSS: a page shared by N processes counts 1/N to
each, so the sum is what the machine gives them), then the CPU time they use over IDLE
seconds with nothing to do. Targets (issue 42): ≤ 512 MB, ≤ 5 ms of CPU per second.

    .venv/bin/python bench/footprint.py --idle 60

Talks only to 127.0.0.1. Run it on an idle machine: nothing else should start meanwhile.
"""

import argparse
import contextlib
import os
import re
import signal
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path

from common import ROOT, free_port


def tree(root: int) -> list[int]:
    found, todo = [], [root]
    while todo:
        pid = todo.pop()
        found.append(pid)
        with contextlib.suppress(OSError):
            for task in Path(f"/proc/{pid}/task").iterdir():
                todo.extend(int(c) for c in (task / "children").read_text().split())
    return found


def name_of(pid: int) -> str:
    cmd = Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode()
    for part, name in (
        ("daphne", "daphne"),
        (" beat", "beat"),
        ("deadlines@", "deadlines worker"),
        (" worker", "worker"),
        ("serve", "serve"),
        ("mcp_notes", "demo MCP server"),
        ("make", "make"),
    ):
        if part in cmd:
            return name
    return cmd[:40]


def memory_kb(pid: int) -> tuple[int, int]:
    """(RSS, PSS) in kB, from /proc/<pid>/smaps_rollup."""
    text = Path(f"/proc/{pid}/smaps_rollup").read_text()
    rss = int(re.search(r"^Rss:\s+(\d+)", text, re.M).group(1))
    pss = int(re.search(r"^Pss:\s+(\d+)", text, re.M).group(1))
    return rss, pss


def cpu_seconds(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--idle", type=float, default=60, help="seconds of idle CPU measured")
    parser.add_argument("--settle", type=float, default=10, help="seconds before measuring")
    args = parser.parse_args()
    port = free_port()
    data = Path(tempfile.mkdtemp(prefix="gw-footprint-"))
    run = uuid.uuid4().hex[:8]
    env = dict(
        os.environ,
        PORT=str(port),
        DEMO_MCP_PORT=str(free_port()),
        GATEWAY_DATA_DIR=str(data / "data"),
        GATEWAY_QUEUE=f"footprint-{run}",
        GATEWAY_PREFIX=f"footprint{run}",
    )
    env.pop("MAKEFLAGS", None)
    database = None
    if os.environ.get("DATABASE_URL"):
        import psycopg

        base = os.environ["DATABASE_URL"].rsplit("/", 1)[0]
        database = f"gw_footprint_{run}"
        with psycopg.connect(f"{base}/postgres", autocommit=True) as conn:
            conn.execute(f"CREATE DATABASE {database}")
        env["DATABASE_URL"] = f"{base}/{database}"
    log = data / "make-run.log"
    proc = subprocess.Popen(
        ["make", "--no-print-directory", "run"],
        cwd=ROOT,
        env=env,
        stdout=log.open("w"),
        stderr=subprocess.STDOUT,
        start_new_session=True,
    )
    try:
        began = time.monotonic()
        while "Serving on" not in log.read_text():
            if proc.poll() is not None or time.monotonic() - began > 300:
                sys.exit(f"make run did not start:\n{log.read_text()}")
            time.sleep(0.2)
        print(
            f"setup: {'PostgreSQL' if database else 'embedded'}; make run ready in "
            f"{time.monotonic() - began:.1f} s"
        )
        token = re.search(r"Token:\s+(gw_\S+)", log.read_text()).group(1)
        text = (ROOT / "docs" / "getting-started.md").read_text()
        script = re.search(r"<!-- walkthrough:.*?-->\n```sh\n(.*?)```", text, re.S).group(1)
        script = script.replace("gw_paste_the_token_make_run_printed", token)
        subprocess.run(
            ["bash", "-euo", "pipefail", "-c", script],
            check=True,
            capture_output=True,
            env={**os.environ, "PORT": str(port)},
            timeout=120,
        )
        print("walk-through: done")
        time.sleep(args.settle)
        pids = tree(proc.pid)
        rows = []
        for pid in pids:
            with contextlib.suppress(OSError):
                rows.append((name_of(pid), pid, *memory_kb(pid)))
        print(f"{'process':20} {'pid':>7} {'RSS MB':>8} {'PSS MB':>8}")
        for name, pid, rss, pss in sorted(rows, key=lambda r: -r[3]):
            print(f"{name:20} {pid:7} {rss / 1024:8.1f} {pss / 1024:8.1f}")
        total_rss = sum(r[2] for r in rows) / 1024
        total_pss = sum(r[3] for r in rows) / 1024
        print(f"{'all ' + str(len(rows)) + ' processes':28} {total_rss:8.1f} {total_pss:8.1f}")
        before = {pid: cpu_seconds(pid) for pid in pids}
        time.sleep(args.idle)
        used: dict[str, float] = {}
        for pid in pids:
            with contextlib.suppress(OSError):
                name = name_of(pid)
                used[name] = used.get(name, 0.0) + cpu_seconds(pid) - before[pid]
        per_second = {name: 1000 * s / args.idle for name, s in used.items()}
        print(
            f"idle CPU over {args.idle:.0f} s: {sum(per_second.values()):.1f} ms per second ("
            + ", ".join(f"{n} {v:.1f}" for n, v in sorted(per_second.items(), key=lambda i: -i[1]))
            + ")"
        )
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGINT)
        proc.wait(timeout=60)
        if database:
            import psycopg

            with psycopg.connect(f"{base}/postgres", autocommit=True) as conn:
                conn.execute(f"DROP DATABASE IF EXISTS {database} WITH (FORCE)")


if __name__ == "__main__":
    main()
