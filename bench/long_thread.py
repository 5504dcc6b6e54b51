"""A long run's page: what its state costs the server as the run grows.

A thread page asks for its status and stack (`/fragments/threads/<id>/state`) after each
event it is shown; the page itself renders the whole transcript. This starts a run, lets it
stop at its request, adds agent messages to it in steps (SIZES events in all), and at each
size times both requests, with the reviewer's session, as the page makes them.

    .venv/bin/python bench/long_thread.py [--sizes 100,2000,10000] [--repeat 5]

Starts its own gateway on a fresh database (bench/common.py); talks only to 127.0.0.1.
"""

import argparse
import statistics
import subprocess
import time
import urllib.request

from common import Gateway
from sockets import AGENT

# Run by `manage.py shell` in the gateway's environment: N agent messages on thread T, each a
# line of text, written 500 to a transaction as a busy run would.
ADD = """
from agents import events
from agents.models import Event
for start in range(0, {n}, 500):
    events.record_many([
        Event(type="AGENT_MESSAGE", thread_id="{thread}",
              payload={{"text": "step %d; " % i * 8, "agent": "bench", "frame": "bench"}})
        for i in range(start, min({n}, start + 500))
    ])
"""


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="100,2000,10000", help="events in the run, ascending")
    parser.add_argument("--repeat", type=int, default=5, help="requests timed at each size")
    args = parser.parse_args()
    sizes = [int(s) for s in args.sizes.split(",")]
    with Gateway(AGENT) as gw:
        cookie = gw.session_cookie()
        thread = gw.call("POST", "/api/threads", {"agent": "bench", "message": "go"})["id"]
        deadline = time.monotonic() + 60
        while gw.call("GET", f"/api/threads/{thread}")["status"] != "suspended":
            if time.monotonic() > deadline:
                raise RuntimeError("the run did not stop at its request within 60 s")
            time.sleep(0.2)

        def timed(path: str) -> tuple[float, int]:
            request = urllib.request.Request(gw.base + path, headers={"Cookie": cookie})
            started = time.monotonic()
            with urllib.request.urlopen(request) as answer:
                body = answer.read()
            return (time.monotonic() - started) * 1000, len(body)

        print(f"setup: {gw.setup}")
        have = 0
        for size in sizes:
            subprocess.run(
                [*gw.manage, "shell", "-c", ADD.format(n=size - have, thread=thread)],
                env=gw.env,
                check=True,
                stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL,
            )
            have = size
            for name, path in (
                ("state", f"/fragments/threads/{thread}/state"),
                ("page", f"/threads/{thread}/"),
            ):
                timed(path)  # warm
                runs = [timed(path) for _ in range(args.repeat)]
                ms = statistics.median(r[0] for r in runs)
                print(
                    f"{size:>6} events  {name:<5}  median {ms:7.1f} ms  {runs[0][1] // 1024:>6} KB"
                )


if __name__ == "__main__":
    main()
