"""A slow gated tool for the fault suite, registered through TOOL_MODULES.

Each start is a line in the file FAULTS_STARTS_FILE names (appended whole, so lines from
several processes never mix); each effect is a DemoAction row keyed by the call's tool_use id,
so the suite counts starts and effects apart.
"""

import os
import time
from typing import Any

from agents.runtime.tools import BLOCKING, ToolContext, registry
from demo.models import DemoAction


def _append(line: str) -> None:
    path = os.environ.get("FAULTS_STARTS_FILE")
    if not path:
        return
    fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    try:
        os.write(fd, line.encode())
    finally:
        os.close(fd)


@registry.tool(
    "slow_transfer",
    description="Transfer money, slowly (the fault suite's tool).",
    input_schema={
        "type": "object",
        "properties": {
            "amount": {"type": "number", "exclusiveMinimum": 0},
            "seconds": {"type": "number", "minimum": 0, "maximum": 600},
        },
        "required": ["amount", "seconds"],
        "additionalProperties": False,
    },
    execution_mode=BLOCKING,
    timeout=3600,
)
def slow_transfer(args: dict[str, Any], context: ToolContext) -> str:
    _append(f"start {context.tool_use_id} {os.getpid()} {time.time():.3f}\n")
    time.sleep(float(args["seconds"]))
    DemoAction.objects.get_or_create(
        idempotency_key=context.tool_use_id,
        defaults={
            "thread_id": context.run,
            "tool": "slow_transfer",
            "arguments": args,
            "summary": f"Transferred {args['amount']} slowly.",
        },
    )
    _append(f"done {context.tool_use_id} {os.getpid()} {time.time():.3f}\n")
    return f"Transferred {args['amount']} after {args['seconds']}s."
