"""`python manage.py serve`: daphne, a Celery worker and beat together; Ctrl-C stops them all."""

import os
import signal
import socket
import subprocess
import sys
import time
from typing import Any

from django.conf import settings
from django.core.management.base import BaseCommand, CommandError


class Command(BaseCommand):
    help = "Run the server, a worker and the sweeper's beat until interrupted."

    def add_arguments(self, parser: Any) -> None:
        parser.add_argument("--host", default=os.environ.get("HOST", "127.0.0.1"))
        parser.add_argument("--port", type=int, default=int(os.environ.get("PORT", "8000")))
        parser.add_argument(
            "--concurrency", type=int, default=int(os.environ.get("WORKER_CONCURRENCY", "2"))
        )
        parser.add_argument(
            "--web-processes",
            type=int,
            default=int(os.environ.get("WEB_PROCESSES", "1")),
            help="daphne processes sharing the port (each runs its own socket hub)",
        )

    def handle(self, *args: Any, **options: Any) -> None:
        py = sys.executable
        schedule = str(settings.DATA_DIR / "celerybeat-schedule")
        web = options["web_processes"]
        if web < 1:
            raise CommandError("--web-processes must be at least 1.")
        listener = None
        bind = ["-b", options["host"], "-p", str(options["port"])]
        if web > 1:
            # One listening socket, opened here and inherited: the kernel hands each new
            # connection to one of the daphne processes.
            family = socket.AF_INET6 if ":" in options["host"] else socket.AF_INET
            listener = socket.socket(family, socket.SOCK_STREAM)
            listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            listener.bind((options["host"], options["port"]))
            listener.listen(1024)
            listener.set_inheritable(True)
        daphne = (
            [py, "-m", "daphne", *bind, "gateway.asgi:application"]
            if web == 1
            else [
                # Handed over the way systemd hands sockets (fd 3, LISTEN_FDS, LISTEN_PID), which
                # Twisted, under daphne, knows how to adopt.
                py,
                "-c",
                "import os, sys; os.dup2(int(sys.argv[1]), 3);"
                " os.environ.update(LISTEN_FDS='1', LISTEN_FDNAMES='web',"
                " LISTEN_PID=str(os.getpid()));"
                " os.execv(sys.executable, [sys.executable, '-m', 'daphne', *sys.argv[2:]])",
                str(listener.fileno()),
                "-e",
                f"systemd:domain={'INET6' if family == socket.AF_INET6 else 'INET'}:index=0",
                "gateway.asgi:application",
            ]
        )
        commands = {f"web{i + 1}" if web > 1 else "web": daphne for i in range(web)}
        commands.update(
            {
                "worker": [
                    py,
                    "-m",
                    "celery",
                    "-A",
                    "gateway",
                    "worker",
                    "-l",
                    "warning",
                    "-c",
                    str(options["concurrency"]),
                    "-Q",
                    settings.CELERY_TASK_DEFAULT_QUEUE,
                ],
                "beat": [
                    py,
                    "-m",
                    "celery",
                    "-A",
                    "gateway",
                    "beat",
                    "-l",
                    "warning",
                    "-s",
                    schedule,
                ],
            }
        )
        inherit = (listener.fileno(),) if listener is not None else ()
        procs = {
            name: subprocess.Popen(cmd, pass_fds=inherit if name.startswith("web") else ())
            for name, cmd in commands.items()
        }
        if listener is not None:
            listener.close()  # the daphne processes hold it now
        stopping = False

        def stop(signum: int, frame: Any) -> None:
            nonlocal stopping
            stopping = True

        signal.signal(signal.SIGINT, stop)
        signal.signal(signal.SIGTERM, stop)
        url = f"http://{options['host']}:{options['port']}/"
        self.stdout.write(
            f"Serving on {url}  (Ctrl-C stops the server, the worker and beat)", ending="\n"
        )
        self.stdout.flush()
        code = 0
        while not stopping:
            for name, proc in procs.items():
                if proc.poll() is not None:
                    self.stderr.write(f"{name} exited with {proc.returncode}; stopping the others")
                    stopping, code = True, 1
                    break
            time.sleep(0.2)
        for proc in procs.values():
            if proc.poll() is None:
                proc.terminate()
        deadline = time.monotonic() + 10
        for proc in procs.values():
            try:
                proc.wait(timeout=max(0.1, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                proc.kill()
        sys.exit(code)
