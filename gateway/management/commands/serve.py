"""`python manage.py serve`: daphne, the Celery workers (runs, and deadlines, whose worker hosts
the clock), all of them (`--role all`, the default) or the roles a machine runs (`--role web
--role worker`); with `--demo` (`make run`), the demo too: its agents, accounts and MCP
server. Ctrl-C stops them all.

Once all are ready it says so in one block: what runs and where, the demo's logins, then
"Serving on URL" (or "Running"); from there on, only warnings and errors. With LOG_LEVEL at
INFO or DEBUG (`-v 2` sets INFO, `-v 3` DEBUG) every process logs at that level, Celery's
banners included, and serve says when each process is ready."""

import json
import os
import socket
import sys
import tempfile
import textwrap
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from django.conf import settings
from django.core.management.base import BaseCommand, CommandError

# A worker that exits by itself more than this often within the window stops serve.
MAX_RESTARTS = 5
RESTART_WINDOW = 60.0
# While something is not ready after this many seconds, serve says what it still waits for.
SLOW_START = 30.0
ROLES = ("web", "worker", "deadlines", "beat")
# The demo MCP server's process, started with --demo (demo/mcp_notes.py).
NOTES = "mcp-notes"


class Command(BaseCommand):
    help = (
        "Run the web server, the run workers and the deadlines worker with the clock (or the "
        "roles given) until interrupted."
    )

    def add_arguments(self, parser: Any) -> None:
        parser.add_argument("--host", default=os.environ.get("HOST", "127.0.0.1"))
        parser.add_argument("--port", type=int, default=int(os.environ.get("PORT", "8000")))
        parser.add_argument(
            "--concurrency",
            type=int,
            default=int(os.environ.get("WORKER_CONCURRENCY", "2")),
            help="steps of runs at once: worker processes under the solo pool (the default), "
            "else the one worker's children or threads",
        )
        parser.add_argument(
            "--web-processes",
            type=int,
            default=int(os.environ.get("WEB_PROCESSES", "1")),
            help="daphne processes sharing the port (each runs its own socket hub)",
        )
        parser.add_argument(
            "--role",
            action="append",
            choices=[*ROLES, "all"],
            help="what this machine runs; repeat for several (default: all). beat: the clock "
            "(the sweeper and the channels' rounds); it takes a lease, so one clock runs them "
            "at a time whatever the number of machines",
        )
        parser.add_argument(
            "--proxy-headers",
            action="store_true",
            default=settings.PROXY_HEADERS,
            help="take the client's address from X-Forwarded-For when the peer is one of "
            "TRUSTED_PROXIES (default: the PROXY_HEADERS setting)",
        )
        parser.add_argument(
            "--demo",
            action="store_true",
            help="make run's demo: load demo/agents.yaml, reset the demo reviewer and admin "
            "(their logins are printed), and start the demo MCP server (demo/mcp_notes.py)",
        )

    def handle(self, *args: Any, **options: Any) -> None:
        roles = set(options["role"] or ["all"])
        if "all" in roles:
            roles = set(ROLES)
        if options["proxy_headers"]:
            # Read by gateway.asgi in the daphne processes (infra.forwarded).
            os.environ["PROXY_HEADERS"] = "true"
        # -v 2 and 3: every process logs more (gateway/settings.py reads LOG_LEVEL in each).
        if options["verbosity"] > 1:
            os.environ.setdefault("LOG_LEVEL", "INFO" if options["verbosity"] == 2 else "DEBUG")
        level = os.environ.get("LOG_LEVEL", "").upper()
        chatty = level in ("INFO", "DEBUG")
        demo = None
        if options["demo"]:
            from demo import serving

            demo = serving.prepare()
        py = sys.executable
        web = options["web_processes"]
        if web < 1:
            raise CommandError("--web-processes must be at least 1.")
        listener = None
        bind = ["-b", options["host"], "-p", str(options["port"])]
        # daphne's access log, a line per request on stdout, only when asked for more.
        access_log = [] if chatty else ["-v", "0"]
        if web > 1 and "web" in roles:
            # One listening socket, opened here and inherited: the kernel hands each new
            # connection to one of the daphne processes.
            family = socket.AF_INET6 if ":" in options["host"] else socket.AF_INET
            listener = socket.socket(family, socket.SOCK_STREAM)
            listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            listener.bind((options["host"], options["port"]))
            listener.listen(1024)
            listener.set_inheritable(True)
        commands: dict[str, list[str]] = {}
        if "web" in roles:
            daphne = (
                [py, "-m", "daphne", *access_log, *bind, "gateway.asgi:application"]
                if web == 1
                else [
                    # Handed over the way systemd hands sockets (fd 3, LISTEN_FDS, LISTEN_PID),
                    # which Twisted, under daphne, knows how to adopt.
                    py,
                    "-c",
                    "import os, sys; os.dup2(int(sys.argv[1]), 3);"
                    " os.environ.update(LISTEN_FDS='1', LISTEN_FDNAMES='web',"
                    " LISTEN_PID=str(os.getpid()));"
                    " os.execv(sys.executable, [sys.executable, '-m', 'daphne', *sys.argv[2:]])",
                    str(listener.fileno()),
                    *access_log,
                    "-e",
                    f"systemd:domain={'INET6' if family == socket.AF_INET6 else 'INET'}:index=0",
                    "gateway.asgi:application",
                ]
            )
            commands = {f"web{i + 1}" if web > 1 else "web": daphne for i in range(web)}
        # Celery through gateway.celery_ready, which creates a file once the worker consumes
        # from its queues: "ready" below means that, not merely "started".
        # Without their banners (`-q`) unless asked for more.
        celery = [py, "-m", "gateway.celery_ready", "-A", "gateway", *(() if chatty else ("-q",))]
        celery_level = ("-l", level.lower() if level else "warning")
        # No gossip, mingle or heartbeat events between the workers: nothing here uses them
        # (the deadlines worker is found by its queue), and each costs broker messages that
        # every worker reads, busy or idle (bench/README.md).
        quiet = ("--without-gossip", "--without-mingle", "--without-heartbeat")
        steps = options["concurrency"]
        if steps < 1:
            raise CommandError("--concurrency must be at least 1.")
        run_worker = [*celery, "worker", *celery_level, *quiet]
        run_worker += ["-Q", settings.CELERY_TASK_DEFAULT_QUEUE]
        if settings.CELERY_WORKER_POOL == "solo":
            # One step at a time per worker process, as many processes as steps: no parent
            # passing each message to a child over a pipe, and no GIL shared between steps
            # (bench/README.md). Each needs a node name of its own.
            # (-c 1: what each does; Celery's banner said the default, 2, with "(solo)".)
            workers = {
                f"worker{i + 1}" if steps > 1 else "worker": [
                    *run_worker,
                    *("-c", "1", "-n", f"worker{i + 1}@%h"),
                ]
                for i in range(steps)
            }
        else:
            workers = {"worker": [*run_worker, "-c", str(steps)]}
        if "worker" in roles:
            commands.update(workers)
        # The clock (gateway.clock: the sweeper and the channels' rounds, run when they fall
        # due, while it holds the beat lease) is a thread of the deadlines worker: one process
        # fewer than Celery beat beside it, and no broker message for the sweeper (bench/
        # footprint.py). A machine given the beat role alone runs a deadlines worker for it.
        clock_host = None
        deadlines = [*celery, "worker", *celery_level, "-c", "1", *quiet]
        deadlines += ["-Q", settings.CELERY_DEADLINE_QUEUE]
        if "deadlines" in roles:
            # Deadlines and the sweeper on a worker of their own: never behind the runs.
            commands["deadlines"] = [*deadlines, "-n", "deadlines@%h"]
            if "beat" in roles:
                clock_host = "deadlines"
        elif "beat" in roles:
            commands["beat"] = [*deadlines, "-n", "beat@%h"]
            clock_host = "beat"
        # Where people open the site, unless the deployment says: the events socket accepts
        # session pages from there only (WEBSOCKET_ALLOWED_ORIGINS defaults to it).
        host = f"[{options['host']}]" if ":" in options["host"] else options["host"]
        os.environ.setdefault("SITE_URL", f"http://{host}:{options['port']}")
        if demo is not None and demo.notes is not None:
            commands[NOTES] = demo.notes_command()
        ready_dir = Path(tempfile.mkdtemp(prefix="serve-ready-"))
        inherit = [listener.fileno()] if listener is not None else []
        url = f"http://{host}:{options['port']}/"
        # What to knock on to see the server answer (a wildcard address is not one to dial).
        probe = {"0.0.0.0": "127.0.0.1", "::": "::1", "": "127.0.0.1"}.get(
            options["host"], options["host"]
        )
        processes: dict[str, dict[str, Any]] = {}
        for name, argv in commands.items():
            if name.startswith("web"):
                # Any answer: ALLOWED_HOSTS may refuse the probe's Host, which still proves
                # daphne serves the app. Processes sharing a socket are ready together.
                processes[name] = {
                    "argv": argv,
                    "pass_fds": inherit,
                    "ready": {"http": [probe, options["port"], "/healthz"]},
                    "vital": True,
                }
            elif name == NOTES:
                notes = urlsplit(demo.notes_url)
                processes[name] = {
                    "argv": argv,
                    "pass_fds": [demo.notes.fileno()],
                    "ready": {"http": [notes.hostname, notes.port, notes.path]},
                }
            else:
                # Ready once gateway.celery_ready creates its file. CELERY_SKIP_CHECKS: serve
                # ran Django's system checks already; in a worker they would import
                # every URLconf's views (the A2A SDK, Slack's Bolt, WebAuthn, Prometheus...),
                # which no task needs (bench/footprint.py).
                env = {"GATEWAY_READY_FILE": str(ready_dir / name), "CELERY_SKIP_CHECKS": "true"}
                if name == clock_host:
                    env["GATEWAY_CLOCK"] = "true"  # gateway.celery starts the clock
                processes[name] = {
                    "argv": argv,
                    "env": env,
                    "ready": {"file": env["GATEWAY_READY_FILE"]},
                }
        keep_notes = demo is not None and demo.notes is not None
        spec = {
            "processes": processes,
            "close_after_start": inherit,  # the daphne processes hold the listener then
            "close_at_end": [demo.notes.fileno()] if keep_notes else [],
            "remove_at_end": str(ready_dir),
            "chatty": chatty,
            "summary": self._summary(list(commands), url, web, demo, chatty, "beat" in roles),
            "serving": (
                f"Serving on {url}  (Ctrl-C stops the server and the workers)"
                if "web" in roles
                else f"Running {', '.join(commands)}  (Ctrl-C stops them)"
            ),
            "slow_start": SLOW_START,
            "max_restarts": MAX_RESTARTS,
            "restart_window": RESTART_WINDOW,
        }
        spec_file = ready_dir / "spec.json"
        spec_file.write_text(json.dumps(spec))
        # From here on serve only watches its children: it becomes infra.supervisor (the same
        # pid, terminal and inherited sockets), which loads no Django (bench/footprint.py).
        self.stdout.flush()
        sys.stdout.flush()
        os.execv(py, [py, "-m", "infra.supervisor", str(spec_file)])

    @staticmethod
    def _summary(
        names: list[str], url: str, web: int, demo: Any, chatty: bool, beat: bool
    ) -> list[str]:
        """The block said once all are ready: what runs and where, the demo's logins, and
        what needs a person's attention ("{took}": the seconds it took, said by
        infra.supervisor)."""
        workers = [n for n in names if n.startswith("worker")]
        rows = []
        if any(n.startswith("web") for n in names):
            rows.append(("web", f"{url}  (daphne{f', {web} processes' if web > 1 else ''})"))
        if workers:
            rows.append((", ".join(workers), "run the agents, one step of a run at a time each"))
        clock = "the clock: the sweeper and the channels' rounds, when due (beat lease)"
        if "deadlines" in names:
            rows.append(("deadlines", f"deadlines; {clock}" if beat else "deadlines"))
        if "beat" in names:
            rows.append(("beat", clock))
        if demo is not None and demo.notes_refused:
            rows.append((NOTES, f"not started: {demo.notes_refused}"))
        elif demo is not None:
            port = urlsplit(demo.notes_url).port
            rows.append((NOTES, f"the demo MCP server on :{port}; MCP clients: {url}mcp/notes"))
        width = max(len(n) for n, _ in rows)
        lines = ["Ready in {took} s:", *(f"  {n.ljust(width)}  {w}" for n, w in rows)]
        if demo is not None:
            for change, agents in demo.changed.items():
                said = f"Demo agents {change} (demo/agents.yaml): {', '.join(agents)}"
                lines += textwrap.wrap(said, 99, subsequent_indent="  ")
            lines.append("Demo logins (new passwords and token on every run):")
            lines += [f"  {line}" for login in demo.logins for line in login.lines()]
        if workers and os.geteuid() == 0:
            lines.append(
                "Running as root: Celery advises running its workers as a user of their own."
            )
        if not chatty:
            lines.append(
                "Only warnings and errors from here on "
                "(LOG_LEVEL=info make run, or manage.py serve -v 2, says more)."
            )
        return lines
