"""An immediate call's trip to an HTTP upstream, as plain JSON-RPC over the upstream's
streamable HTTP session, without the SDK's client.

Written here rather than left to the SDK, for a reason measured (bench/README.md, issue 30):
the SDK's client passes each call through a dispatcher, memory streams and a transport task
on its way to one HTTP POST, and validated it twice on the way back; in the server process
that was 4.8 ms of a relayed call whose whole budget over the upstream's own time is 3 ms,
where the POST itself takes under 2. The approved calls of gated tools, made by a worker,
and calls to stdio servers keep the SDK's client (mcp_gateway.sessions); this path is the
relay's. Its HTTP client is aiohttp's, not httpx's as the SDK's: a POST and its answer cost
httpx 0.84 ms of CPU and aiohttp 0.30 (bench/README.md); an SSE answer's bytes are still
read by httpx's own event parser (`httpx2.EventSource`), so both read events alike.

What the SDK's client does for such a call, this does the same way, on the revision declared
for the upstream or, undeclared, the newest both speak (`server/discover` first, as the
SDK's client does in its "auto" mode: 2026-07-28 if the upstream offers it, else a 2025
session):

- **The session.** `initialize` (the latest handshake revision, clientInfo, the elicitation
  capability), `notifications/initialized`, then the session id and negotiated revision on
  every POST. One session per upstream and event loop serves every call, at once: each POST
  gets its answer, and any question about it, on its own response. A session the upstream
  forgot (404 while one is open) is opened again and the call sent once more: it was refused,
  not run.
- **The answer**, as JSON or as an SSE stream, the upstream's questions during the call
  answered (mcp_gateway.plain_wire: the messages on the wire). A stream that ends without the
  call's answer is the call's failure.
- **A stateless upstream** (on 2026-07-28, asked or declared) has no session: each call is one
  request carrying the revision, the client's capabilities and name in its `_meta` and the
  routing headers (`Mcp-Method`, `Mcp-Name`). An `input_required` answer is raised as
  InputRequired, and forward.call makes the call through the SDK's client, which asks the
  questions and calls again with the answers (it would send the first request again: a
  server asking that way has not run the call, the revision says so). An upstream that was
  asked, and now refuses the revision it offered (it was downgraded), is asked again and the
  call sent once more, on what it now speaks: a request refused for its revision was not run.
- **The result** is validated as the SDK validates it (`CallToolResult`; structured content
  against the tool's output schema, when it has one and the call did not fail); a JSON-RPC
  error or any other failure is raised, and forward.call makes it the call's result.
"""

import asyncio
import contextlib
import itertools
import weakref
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from typing import Any

import aiohttp
import mcp_types as types
from mcp.client.session import ElicitationFnT
from mcp.shared.exceptions import MCPError
from mcp_types import UNSUPPORTED_PROTOCOL_VERSION
from mcp_types.version import (
    HANDSHAKE_PROTOCOL_VERSIONS,
    LATEST_HANDSHAKE_VERSION,
    LATEST_MODERN_VERSION,
    MODERN_PROTOCOL_VERSIONS,
)

from mcp_gateway import plain_wire


class Forgotten(Exception):
    """The upstream does not know the session (it restarted): the call was not run."""


class VersionRefused(Exception):
    """A stateless call was refused for its revision (the upstream no longer speaks it): the
    call was not run (a server checks the revision before anything else)."""


class InputRequired(Exception):
    """A stateless upstream answered `input_required`: it needs answers before it runs the
    call, which the SDK's client gets and sends back (forward.call calls again through it)."""


@dataclass
class _Line:
    """One session with an upstream, over a client that ends with it."""

    url: str
    http: aiohttp.ClientSession
    # A stateless revision (2026-07-28), or "" for the 2025 revisions' sessions.
    stateless: str = ""
    # Not yet known which: the upstream is asked first (discover).
    undecided: bool = False
    # Undeclared: the revision is the upstream's answer, asked again if it refuses it.
    asked: bool = False
    session_id: str | None = None
    version: str = ""
    ids: "itertools.count[int]" = field(default_factory=lambda: itertools.count(1))
    opening: asyncio.Lock = field(default_factory=asyncio.Lock)

    def headers(self) -> dict[str, str]:
        sent = {"accept": plain_wire.ACCEPT, "content-type": "application/json"}
        if self.version:
            sent["mcp-protocol-version"] = self.version
        if self.session_id:
            sent["mcp-session-id"] = self.session_id
        return sent

    async def open(self, forgotten: str | None = None) -> None:
        """Open the session: a first one, or again after the upstream forgot `forgotten`
        (unless another call has opened one since)."""
        async with self.opening:
            if self.version and (forgotten is None or self.session_id != forgotten):
                return
            self.session_id, self.version = None, ""
            hello = {
                "protocolVersion": LATEST_HANDSHAKE_VERSION,
                "capabilities": plain_wire.CAPABILITIES,
                "clientInfo": plain_wire.CLIENT_INFO,
            }
            rid = next(self.ids)
            message = plain_wire.request(rid, "initialize", hello)
            async with self.http.post(self.url, json=message, headers=self.headers()) as response:
                await plain_wire.raise_for_status(response)
                session_id = response.headers.get("mcp-session-id")
                result = await plain_wire.final(self, response, rid, None)
            version = result.get("protocolVersion")
            if version not in HANDSHAKE_PROTOCOL_VERSIONS:
                raise MCPError(
                    plain_wire.CONNECTION_CLOSED, f"Unsupported protocol version: {version!r}"
                )
            self.session_id, self.version = session_id, version
            await plain_wire.post(self, {"jsonrpc": "2.0", "method": "notifications/initialized"})

    async def discover(self) -> None:
        """Ask the upstream which revisions it speaks (`server/discover`, as the official
        client does in its "auto" mode) and speak the newest stateless one both know; any
        refusal (an HTTP error, a JSON-RPC error, no such revision) means the 2025
        handshake. A failure to reach the upstream is the call's, and the next call asks
        again."""
        async with self.opening:
            if not self.undecided:
                return
            rid = next(self.ids)
            message, headers = plain_wire.stateless_request(
                LATEST_MODERN_VERSION, rid, "server/discover", {}
            )
            result: Any = None
            async with self.http.post(self.url, json=message, headers=headers) as response:
                if response.status < 400:
                    with contextlib.suppress(MCPError, ValueError):
                        result = await plain_wire.final(self, response, rid, None)
                else:
                    await response.content.read(
                        plain_wire.MAX_ERROR
                    )  # a refusal: its start is enough
            offered = result.get("supportedVersions") if isinstance(result, dict) else None
            both = [v for v in MODERN_PROTOCOL_VERSIONS if v in (offered or ())]
            self.stateless = both[-1] if both else ""
            self.undecided = False

    async def call(
        self, tool: str, arguments: dict[str, Any], asks: ElicitationFnT | None
    ) -> dict[str, Any]:
        if self.undecided:
            await self.discover()
        if self.stateless:
            try:
                return await self._stateless_call(tool, arguments)
            except VersionRefused as refused:
                if not self.asked:
                    raise MCPError(
                        UNSUPPORTED_PROTOCOL_VERSION,
                        f"The upstream refuses its declared revision {self.stateless}"
                        f" ({str(refused)[:500]}): declare the one it speaks, or none.",
                    ) from None
                # It changed since it was asked (a downgrade): asked again.
                self.stateless, self.undecided = "", True
                await self.discover()
                if self.stateless:
                    return await self._stateless_call(tool, arguments)
        if not self.version:
            await self.open()
        for attempt in (1, 2):
            known = self.session_id
            try:
                return await self._call_once(tool, arguments, asks)
            except Forgotten:
                if attempt == 2:
                    raise
                await self.open(forgotten=known)
        raise AssertionError("unreachable")  # the loop returns or raises

    async def _call_once(
        self, tool: str, arguments: dict[str, Any], asks: ElicitationFnT | None
    ) -> dict[str, Any]:
        rid = next(self.ids)
        message = plain_wire.request(rid, "tools/call", {"name": tool, "arguments": arguments})
        async with self.http.post(self.url, json=message, headers=self.headers()) as response:
            if response.status == 404 and self.session_id:
                raise Forgotten()
            await plain_wire.raise_for_status(response)
            return await plain_wire.final(self, response, rid, asks)

    async def _stateless_call(self, tool: str, arguments: dict[str, Any]) -> dict[str, Any]:
        """One request carrying what a session would have said (the revision, the client's
        capabilities and name, in `_meta` and the routing headers)."""
        rid = next(self.ids)
        params = {"name": tool, "arguments": arguments}
        message, headers = plain_wire.stateless_request(
            self.stateless, rid, "tools/call", params, name=tool
        )
        async with self.http.post(self.url, json=message, headers=headers) as response:
            try:
                await plain_wire.raise_for_status(response)
            except MCPError as e:
                if response.status == 400 and plain_wire.refuses_version(e):
                    raise VersionRefused(e.error.message) from e
                raise
            result = await plain_wire.final(self, response, rid, None)
        if result.get("resultType") == "input_required":
            raise InputRequired()
        return result


# event loop -> upstream key -> its line
_lines: "weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, dict[str, _Line]]" = (
    weakref.WeakKeyDictionary()
)


def line(name: str, key: str, url: str, make_http: Any, revision: str = "") -> _Line:
    """This loop's line to the upstream `name`, opened with `key` (forward._key: its address,
    revision and secrets); a line of the same upstream with another key (it was edited) is
    closed. `revision`: the one declared for the upstream: a stateless one, a 2025 one (a
    session), or "" for the newest the upstream offers."""
    loop = asyncio.get_running_loop()
    lines = _lines.get(loop)
    if lines is None:
        lines = _lines[loop] = {}
        _close_at_shutdown(loop, lines)
    kept = lines.get(key)
    if kept is None:
        for old in [k for k in lines if k.split(" ", 1)[0] == name]:
            stale = lines.pop(old)
            asyncio.get_running_loop().create_task(stale.http.close())
        stateless = revision if revision in MODERN_PROTOCOL_VERSIONS else ""
        kept = lines[key] = _Line(
            url, make_http(), stateless, undecided=not revision, asked=not revision
        )
    return kept


def _close_at_shutdown(loop: asyncio.AbstractEventLoop, lines: dict[str, _Line]) -> None:
    """Close the loop's lines when it shuts down (asyncio.run's end: a test's, a script's;
    the server's loop lasts). asyncio has no hook for it but the one for async generators
    left running, which it closes then: a generator waiting in its `finally` is one.
    Without it, the clients would be collected unclosed, and aiohttp warns of each."""

    async def closer() -> AsyncIterator[None]:
        try:
            yield
        finally:
            for each in list(lines.values()):
                await each.http.close()

    async def start() -> None:
        await anext(keeper)

    keeper = closer()
    _keepers[loop] = keeper  # held as long as the loop is: the loop holds it only weakly
    loop.create_task(start())


_keepers: "weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, Any]" = weakref.WeakKeyDictionary()


async def call(
    line_: _Line, tool: str, arguments: dict[str, Any], asks: ElicitationFnT | None
) -> types.CallToolResult:
    """The upstream's result of `tool`, as the SDK's client would return it (unvalidated
    against an output schema: forward.call does that, with the tool's listing)."""
    return types.CallToolResult.model_validate(await line_.call(tool, arguments, asks))
