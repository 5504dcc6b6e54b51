"""A pytest plugin loaded before Django reads its settings (`-p gateway.testenv`).

It gives the test run its own data folder (its broker, its SQLite test database) and its own
queue and channel prefix, so a `make run` on the same machine never takes the tests' tasks.
"""

import os
import shutil
from pathlib import Path

_run = f"test-{os.getpid()}"
os.environ.setdefault(
    "GATEWAY_DATA_DIR", str(Path(__file__).resolve().parent.parent / "var" / _run)
)
os.environ.setdefault("GATEWAY_QUEUE", f"gateway-{_run}")
os.environ.setdefault("GATEWAY_PREFIX", f"gw{_run}")
# The servers a test starts read the receipts' signing key at each signing: a test's flush
# makes a new key, and a server process outlives the test (agents.receipt_keys).
os.environ.setdefault("RECEIPT_KEY_CACHE_SECONDS", "0")
# Some tests race 20 requests in one process; each holds a pooled connection meanwhile.
os.environ.setdefault("DATABASE_POOL_SIZE", "24")


def pytest_unconfigure(config: object) -> None:
    data = Path(os.environ["GATEWAY_DATA_DIR"])
    if data.name == _run:
        shutil.rmtree(data, ignore_errors=True)
