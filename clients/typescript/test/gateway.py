"""A live gateway for the TypeScript client's tests, as tests/external start one for the Python
client: `manage.py serve` (daphne, the workers, beat) on a fresh data folder and a free port,
the embedded default (SQLite, the filesystem broker), with an agent, a reviewer and a
reviewer who also raises requests, each with a token.

Run from the repository root with its virtualenv: it prints one JSON line (url, tokens) once
the gateway serves, then serves until its standard input closes (the test process ended) or
it is sent SIGTERM, and stops the gateway and removes the folder.
"""

import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[3]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def environment(data: Path, port: int) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in ("DATABASE_URL", "REDIS_URL")}
    run = uuid.uuid4().hex[:8]
    env.update(
        DJANGO_SETTINGS_MODULE="gateway.settings",
        GATEWAY_DATA_DIR=str(data),
        GATEWAY_QUEUE=f"typescript-{run}",
        GATEWAY_PREFIX=f"typescript{run}",
        PORT=str(port),
    )
    env.pop("MAKEFLAGS", None)
    return env


def accounts() -> dict[str, str]:
    """The users and their tokens: the agent (runs), a reviewer (decide), and a reviewer who
    also raises requests (runs and decide: the policy's four eyes refuse her own)."""
    import django

    django.setup()
    from django.contrib.auth.models import Group, Permission, User
    from django.core.management import call_command

    from access.models import ApiToken
    from access.permissions import CALLER_PERMISSIONS, REVIEWERS

    call_command("migrate", verbosity=0, interactive=False)
    call_command("create_agent_user", "ts-agent", stdout=open(os.devnull, "w"))
    reviewers = Group.objects.get(name=REVIEWERS)
    alice = User.objects.create_user("alice")
    alice.groups.add(reviewers)
    carol = User.objects.create_user("carol")
    carol.groups.add(reviewers)
    carol.user_permissions.add(
        *Permission.objects.filter(
            content_type__app_label="agents", codename__in=[c for _, c in CALLER_PERMISSIONS]
        )
    )
    agent = User.objects.get(username="ts-agent")
    return {
        "agent": ApiToken.issue(agent, "typescript-tests", ["runs"])[1],
        "reviewer": ApiToken.issue(alice, "typescript-tests", ["decide"])[1],
        "selfReviewer": ApiToken.issue(carol, "typescript-tests", ["runs", "decide"])[1],
    }


def serve(env: dict[str, str], log: Path) -> subprocess.Popen[bytes]:
    proc = subprocess.Popen(
        [sys.executable, "manage.py", "serve", "--port", env["PORT"], "--concurrency", "1"],
        cwd=ROOT,
        env=env,
        stdout=log.open("w"),
        stderr=subprocess.STDOUT,
        start_new_session=True,
    )
    end = time.monotonic() + 120
    while "Serving on" not in log.read_text():
        if proc.poll() is not None or time.monotonic() > end:
            stop(proc)
            raise SystemExit(f"the gateway did not start:\n{log.read_text()[-3000:]}")
        time.sleep(0.2)
    return proc


def stop(proc: subprocess.Popen[bytes]) -> None:
    if proc.poll() is None:
        os.killpg(proc.pid, signal.SIGINT)  # what Ctrl-C sends: serve stops its children
        try:
            proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()


def main() -> None:
    data = Path(tempfile.mkdtemp(prefix="gateway-typescript-"))
    port = free_port()
    env = environment(data, port)
    os.environ.update(env)
    sys.path.insert(0, str(ROOT))
    proc = None
    try:
        tokens = accounts()
        proc = serve(env, data / "serve.log")
        answer: dict[str, Any] = {"url": f"http://127.0.0.1:{port}", "tokens": tokens}
        print(json.dumps(answer), flush=True)
        signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))  # the finally below stops it
        sys.stdin.read()  # until the test process closes it, or ends
    finally:
        if proc is not None:
            stop(proc)
        shutil.rmtree(data, ignore_errors=True)


if __name__ == "__main__":
    main()
