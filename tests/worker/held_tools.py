"""A blocking tool held until the test lets it act, for the cancel-while-it-runs tests:
registered in the worker through TOOL_MODULES (tests/worker/conftest.py) and in the test
process by importing this module."""

import time
from pathlib import Path
from typing import Any

from agents.runtime.tools import BLOCKING, ToolContext, registry


@registry.tool(
    "held_transfer",
    description="Transfer money when let: say that it started (PATH.started), wait until PATH "
    "exists, then make the transfer (PATH.done, the outside effect).",
    input_schema={
        "type": "object",
        "properties": {"path": {"type": "string"}},
        "required": ["path"],
        "additionalProperties": False,
    },
    execution_mode=BLOCKING,
)
def held_transfer(args: dict[str, Any], context: ToolContext) -> str:
    path = Path(args["path"])
    Path(f"{path}.started").touch()
    given_up = time.monotonic() + 60  # a test that failed before letting it go
    while not path.exists() and time.monotonic() < given_up:
        time.sleep(0.05)
    Path(f"{path}.done").write_text(context.idempotency_key)
    return "Transferred 10 EUR."
