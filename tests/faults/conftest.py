"""The fault suite's fixtures: one gateway of its own for the session, checked after each test.

The suite runs only when asked for (`pytest tests/faults -m faults`, `make test-faults`): the
ordinary `pytest` run leaves this folder out, since the suite starts and kills its own
PostgreSQL, Redis and processes. In CI (CI=true) a missing initdb or redis-server is a failure.
"""

import json
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.faults.harness import Gateway, missing_services
from tests.faults.history import RESULTS

# Set once this session has started the fault gateway: only then is there a table to print.
_ran: list[bool] = []


def _asked_for(config: Any) -> bool:
    return "faults" in (config.getoption("markexpr", "") or "")


def pytest_ignore_collect(collection_path: Path, config: Any) -> bool | None:
    if collection_path.name.startswith("test_") and not _asked_for(config):
        return True
    return None


def pytest_collection_modifyitems(config: Any, items: list[Any]) -> None:
    for item in items:
        if Path(str(item.path)).parent == Path(__file__).parent:
            item.add_marker(pytest.mark.faults)


@pytest.fixture(scope="session")
def gateway() -> Iterator[Gateway]:
    missing = missing_services()
    if missing:
        message = f"the fault suite needs {', '.join(missing)}"
        if os.environ.get("CI") == "true":
            pytest.fail(message + " (CI must have them)", pytrace=False)
        pytest.skip(message)
    RESULTS.parent.mkdir(exist_ok=True)
    RESULTS.unlink(missing_ok=True)
    _ran.append(True)
    gw = Gateway()
    try:
        gw.start()
        print(f"\nfault gateway: {gw.base_url}, logs in {gw.logs}")
        yield gw
    finally:
        gw.stop()


@pytest.fixture
def gw(gateway: Gateway) -> Iterator[Gateway]:
    """The session's gateway, with every service and process running again afterwards."""
    gateway.ensure_up()
    yield gateway
    gateway.ensure_up()


def pytest_terminal_summary(terminalreporter: Any) -> None:
    if not _ran or not RESULTS.exists():
        return
    rows = [json.loads(line) for line in RESULTS.read_text().splitlines() if line.strip()]
    if not rows:
        return
    terminalreporter.write_sep("=", "fault suite figures")
    terminalreporter.write_line(
        "| scenario | threads | suspensions | 2xx decisions | faults injected | lost |"
        " duplicated | recovery (s) | notes |"
    )
    terminalreporter.write_line("| --- | ---: | ---: | ---: | ---: | ---: | ---: | --- | --- |")
    for r in rows:
        recovery = ", ".join(f"{x:.1f}" for x in r["recovery"]) or "-"
        notes = "; ".join(f"{k} {v}" for k, v in r["extra"].items())
        if r["violations"]:
            notes += f"; VIOLATIONS {len(r['violations'])}"
        terminalreporter.write_line(
            f"| {r['scenario']} | {r['threads']} | {r['suspensions']} | {r['decisions']} |"
            f" {r['faults']} | {r['lost']} | {r['duplicated']} | {recovery} | {notes} |"
        )
