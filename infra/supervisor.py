"""`python -m infra.supervisor SPEC`: what `manage.py serve` becomes once it has worked out what
to start (it execs this, keeping its pid, its terminal and the sockets it opened). It starts
the processes SPEC (a JSON file) names, says when all are ready, starts again a process that
exits by itself, and stops them all on SIGINT or SIGTERM.

Standard library only, and no Django: serve itself held some 110 MB for as long as the gateway
ran, to watch its children (bench/footprint.py).

SPEC: {"processes": {name: {"argv", "env" (added to the environment), "pass_fds", "ready"
({"file": path} or {"http": [host, port, path]}), "vital" (its exit stops everything)}},
"close_after_start": fds this process gives up once the children hold them, "close_at_end",
"remove_at_end" (a folder), "chatty" (say when each is ready), "summary" (lines said once all
are ready; "{took}" in them is the seconds it took), "serving" (the line said after them),
"slow_start" (seconds before saying what is still awaited), "max_restarts", "restart_window"}.
"""

import contextlib
import http.client
import json
import os
import select
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

# Seconds between two looks at the processes not ready yet.
POLL = 0.2


def answers(host: str, port: int, path: str) -> bool:
    """Whether an HTTP server answers there, whatever its answer."""
    conn = http.client.HTTPConnection(host, port, timeout=1)
    try:
        conn.request("GET", path)
        conn.getresponse().read()
        return True
    except OSError:
        return False
    finally:
        conn.close()


def is_ready(ready: dict[str, Any]) -> bool:
    if "file" in ready:
        return Path(ready["file"]).exists()
    host, port, path = ready["http"]
    return answers(host, port, path)


def say(line: str) -> None:
    sys.stdout.write(line + "\n")
    sys.stdout.flush()


def supervise(spec: dict[str, Any]) -> int:
    processes: dict[str, dict[str, Any]] = spec["processes"]

    def start(name: str) -> subprocess.Popen:
        process = processes[name]
        return subprocess.Popen(
            process["argv"],
            env={**os.environ, **process.get("env", {})},
            pass_fds=tuple(process.get("pass_fds", ())),
        )

    procs = {name: start(name) for name in processes}
    say(f"Starting {', '.join(procs)}...")
    for fd in spec.get("close_after_start", ()):
        os.close(fd)
    stopping = False

    def stop(signum: int, frame: Any) -> None:
        nonlocal stopping
        stopping = True

    # It sleeps until a signal comes: a child's exit (SIGCHLD), Ctrl-C or SIGTERM, each of
    # which writes a byte to this pipe (Python's wakeup fd), so none is missed between a
    # look at the children and the sleep. Only while it waits for them to be ready does it
    # look again every POLL seconds; polling for ever kept it awake 5 times a second
    # (issue 42).
    woken, wake = os.pipe()
    os.set_blocking(woken, False)
    os.set_blocking(wake, False)
    signal.set_wakeup_fd(wake, warn_on_full_buffer=False)
    signal.signal(signal.SIGCHLD, lambda signum, frame: None)
    signal.signal(signal.SIGINT, stop)
    signal.signal(signal.SIGTERM, stop)
    waiting = set(procs)
    began = said = time.monotonic()
    code = 0
    restarts: dict[str, list[float]] = {name: [] for name in procs}
    while not stopping:
        for name, proc in procs.items():
            if proc.poll() is None:
                continue
            # A worker or beat that exits by itself is started again, as a process supervisor
            # would (Celery's worker exits on some broker connection losses, such as a Redis
            # restart, and relies on that); one that keeps exiting, or a vital one (the web
            # server: its socket is shared), stops everything.
            now = time.monotonic()
            recent = [t for t in restarts[name] if now - t < spec["restart_window"]]
            if processes[name].get("vital") or len(recent) >= spec["max_restarts"]:
                sys.stderr.write(f"{name} exited with {proc.returncode}; stopping the others\n")
                stopping, code = True, 1
                break
            restarts[name] = [*recent, now]
            sys.stderr.write(f"{name} exited with {proc.returncode}; starting it again\n")
            procs[name] = start(name)
        if waiting and not stopping:
            for name in sorted(n for n in waiting if is_ready(processes[n]["ready"])):
                waiting.discard(name)
                if spec.get("chatty"):
                    say(f"{name} ready")
            if not waiting:
                took = time.monotonic() - began
                for line in spec["summary"]:
                    say(line.replace("{took}", f"{took:.0f}"))
                say(spec["serving"])
            elif time.monotonic() - said > spec["slow_start"]:
                said = time.monotonic()
                say(f"Still starting after {said - began:.0f} s: {', '.join(sorted(waiting))}")
        if not stopping:
            select.select([woken], [], [], POLL if waiting else None)
            with contextlib.suppress(BlockingIOError):
                os.read(woken, 512)
    signal.set_wakeup_fd(-1)
    os.close(woken)
    os.close(wake)
    if spec.get("remove_at_end"):
        shutil.rmtree(spec["remove_at_end"], ignore_errors=True)
    for fd in spec.get("close_at_end", ()):
        os.close(fd)
    for proc in procs.values():
        if proc.poll() is None:
            proc.terminate()
    deadline = time.monotonic() + 10
    for proc in procs.values():
        try:
            proc.wait(timeout=max(0.1, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            proc.kill()
    return code


if __name__ == "__main__":
    # Read, then removed: it holds the demo's logins, said once in the summary.
    given = Path(sys.argv[1])
    read = json.loads(given.read_text())
    given.unlink()
    sys.exit(supervise(read))
