"""A pytest plugin loaded before Django reads its settings (`-p gateway.testenv`).

It gives the test run its own data folder (its broker, its SQLite test database) and its own
queue and channel prefix, so a `make run` on the same machine never takes the tests' tasks,
and each worker of a parallel run (pytest-xdist) has its own.
"""

import os
import shutil
from pathlib import Path

_run = f"test-{os.getpid()}"
# The names set below, not by the caller. With pytest-xdist (`-n`) the controlling process
# loads this plugin too and its workers inherit its environment: each worker drops what the
# controller set and takes its own folder, queue and prefix, as a run of its own.
_SET = "GATEWAY_TESTENV_SET"
for _name in filter(None, os.environ.pop(_SET, "").split(",")):
    os.environ.pop(_name, None)
_defaults = {
    "GATEWAY_DATA_DIR": str(Path(__file__).resolve().parent.parent / "var" / _run),
    "GATEWAY_QUEUE": f"gateway-{_run}",
    "GATEWAY_PREFIX": f"gw{_run}",
    # The servers a test starts read the receipts' signing key at each signing: a test's flush
    # makes a new key, and a server process outlives the test (agents.receipt_keys).
    "RECEIPT_KEY_CACHE_SECONDS": "0",
    # Some tests race 20 requests in one process; each holds a pooled connection meanwhile.
    "DATABASE_POOL_SIZE": "24",
}
_ours = [name for name in _defaults if name not in os.environ]
os.environ.update({name: _defaults[name] for name in _ours})
os.environ[_SET] = ",".join(_ours)


def pytest_unconfigure(config: object) -> None:
    data = Path(os.environ["GATEWAY_DATA_DIR"])
    if data.name == _run:
        shutil.rmtree(data, ignore_errors=True)
