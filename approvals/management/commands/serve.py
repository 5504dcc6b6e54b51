"""`python manage.py serve`: daphne, a Celery worker and beat together; Ctrl-C stops them all."""

import os
import signal
import subprocess
import sys
import time
from typing import Any

from django.conf import settings
from django.core.management.base import BaseCommand


class Command(BaseCommand):
    help = "Run the server, a worker and the sweeper's beat until interrupted."

    def add_arguments(self, parser: Any) -> None:
        parser.add_argument("--host", default=os.environ.get("HOST", "127.0.0.1"))
        parser.add_argument("--port", type=int, default=int(os.environ.get("PORT", "8000")))
        parser.add_argument(
            "--concurrency", type=int, default=int(os.environ.get("WORKER_CONCURRENCY", "2"))
        )

    def handle(self, *args: Any, **options: Any) -> None:
        py = sys.executable
        schedule = str(settings.DATA_DIR / "celerybeat-schedule")
        commands = {
            "web": [
                py,
                "-m",
                "daphne",
                "-b",
                options["host"],
                "-p",
                str(options["port"]),
                "gateway.asgi:application",
            ],
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
            "beat": [py, "-m", "celery", "-A", "gateway", "beat", "-l", "warning", "-s", schedule],
        }
        procs = {name: subprocess.Popen(cmd) for name, cmd in commands.items()}
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
