"""A tool that hangs, for the time limit tests, and one that waits for the test's word (the
worker's gate, tests/worker/test_gate.py): registered in the worker through TOOL_MODULES
(tests/worker/conftest.py) and in the test process by importing this module."""

import time
from pathlib import Path
from typing import Any

from agents.runtime.tools import ToolContext, registry


@registry.tool(
    "hang",
    description="Wait for an answer that never comes (a hung upstream).",
    input_schema={"type": "object", "properties": {}, "additionalProperties": False},
)
def hang(args: dict[str, Any], context: ToolContext) -> str:
    while True:
        time.sleep(60)


@registry.tool(
    "wait_for_file",
    description="Say that it started (PATH.started), then wait until PATH exists.",
    input_schema={
        "type": "object",
        "properties": {"path": {"type": "string"}},
        "required": ["path"],
        "additionalProperties": False,
    },
)
def wait_for_file(args: dict[str, Any], context: ToolContext) -> str:
    path = Path(args["path"])
    Path(f"{path}.started").touch()
    while not path.exists():
        time.sleep(0.05)
    return "released"
