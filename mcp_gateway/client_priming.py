"""The one use of the `mcp` SDK's private names (the house rule: such a speed-up lives in one
small module, behind a domain-named function, with a tripwire in tests/test_tripwires.py and a
row in ARCHITECTURE.md's table; the behaviour it buys is tested in
tests/mcp_gateway/test_sessions.py, PrimingTestCase).

The SDK's client checks a tool's result against the tool's output schema, and lists the
upstream's tools first when its session has not listed them. A client made for one call has
never listed them, so each relayed call cost an extra `tools/list` request to the upstream
(bench/README.md, issue 30). The gateway holds the upstream's list already (forward.tools,
kept MCP_TOOLS_CACHE_SECONDS): it hands it to the session, which then checks the result the
same way with no request. The SDK has no public way to give a session a listing it did not
fetch (2.3)."""

from collections.abc import Sequence

import mcp_types as types
from mcp.client.session import ClientSession


def know_tools(session: ClientSession, tools: Sequence[types.Tool]) -> None:
    """Tell `session` the upstream's tools, as if it had listed them itself."""
    session._absorb_tool_listing(types.ListToolsResult(tools=list(tools)), complete=True)
