"""A tool that hangs, for the time limit tests: registered in the worker through TOOL_MODULES
(tests/worker/conftest.py) and in the test process by importing this module."""

import time
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
