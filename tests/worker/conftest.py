"""Settings the session's worker reads from the environment when it starts, put there at
collection (as tests/webhooks/conftest.py does): the hanging and held tools, and a tool time
limit short enough for a test to wait for, yet longer than the demo `pause` calls other worker
tests make (4 s at most)."""

import os

TOOL_TIME_LIMIT = "5"
HANGING_TOOLS = "tests.worker.hanging_tools"
HELD_TOOLS = "tests.worker.held_tools"

os.environ.setdefault("TOOL_TIME_LIMIT_SECONDS", TOOL_TIME_LIMIT)
_modules = [m for m in os.environ.get("TOOL_MODULES", "").split(",") if m.strip()]
_missing = [m for m in (HANGING_TOOLS, HELD_TOOLS) if m not in _modules]
if _missing:
    os.environ["TOOL_MODULES"] = ",".join([*_modules, *_missing])
