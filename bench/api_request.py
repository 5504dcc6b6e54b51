"""daphne's CPU per small API request: one client, one kept connection, N sequential GETs.

    .venv/bin/python bench/api_request.py --requests 3000 [--path /healthz]

What every request to Django pays in the web process whatever its view does: Twisted's HTTP,
the ASGI application, the hop to a pooled thread and back, Django's handler and middleware.
`/healthz` (liveness: no query) by default; `--path thread` asks for a run's state
(GET /api/threads/<id>, of a run the benchmark starts first). Reports the wall time and the
web process's CPU per request. Starts its own gateway on a fresh database (bench/common.py);
talks only to 127.0.0.1.
"""

import argparse
import http.client
import time

from common import Gateway
from sockets import AGENT


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--requests", type=int, default=3000)
    parser.add_argument("--warmup", type=int, default=200, help="untimed requests first")
    parser.add_argument("--path", default="/healthz", help="a path, or `thread`")
    args = parser.parse_args()
    with Gateway(AGENT, ["--concurrency", "1"]) as gw:
        path = args.path
        if path == "thread":
            thread = gw.call("POST", "/api/threads", {"agent": "bench", "message": "go"})["id"]
            path = f"/api/threads/{thread}"
        conn = http.client.HTTPConnection("127.0.0.1", gw.port)
        headers = {"Authorization": f"Bearer {gw.token}"}

        def get() -> None:
            conn.request("GET", path, headers=headers)
            answer = conn.getresponse()
            body = answer.read()
            if answer.status != 200:
                raise RuntimeError(f"GET {path}: {answer.status} {body[:200]!r}")

        for _ in range(args.warmup):
            get()
        time.sleep(2)  # the warm-up's own work (events, nudges) settles first
        before = gw.cpu_seconds()
        started = time.monotonic()
        for _ in range(args.requests):
            get()
        elapsed = time.monotonic() - started
        used = gw.cpu_seconds()["daphne"] - before["daphne"]
        n = args.requests
        print(f"setup: {gw.setup}; GET {args.path}")
        print(
            f"{n} requests in {elapsed:.2f} s: {elapsed / n * 1000:.2f} ms each; "
            f"daphne's CPU {used / n * 1000:.3f} ms per request"
        )


if __name__ == "__main__":
    main()
