"""Calls to an upstream MCP server, through the official client: over streamable HTTP, or
over stdio to a process started for the call (a stdio server declared with `command:`)."""

import contextlib
import functools
import hashlib
import ssl
import time
import urllib.parse
import urllib.request
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from typing import Any

import aiohttp
import httpx2
import jsonschema
import mcp_types as types
from django.conf import settings
from mcp import Client
from mcp.client.session import ElicitationFnT
from mcp.client.stdio import StdioServerParameters, stdio_client
from mcp.client.streamable_http import streamable_http_client
from mcp_types.version import MODERN_PROTOCOL_VERSIONS

from mcp_gateway import client_priming, plain_http, sessions
from mcp_gateway.models import Upstream
from mcp_gateway.upstreams import expand


@dataclass
class Listing:
    """An upstream's tools as read at `read` (monotonic) from `address`, in its order, with
    each tool's arguments validator, compiled when first needed (a call checks its arguments
    against the tool's input schema; compiling the schema each time was a tenth of a call)."""

    read: float
    address: str
    tools: list[types.Tool]
    named: dict[str, types.Tool] = field(init=False)
    validators: dict[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        self.named = {t.name: t for t in self.tools}

    def problem(self, tool: types.Tool, arguments: dict[str, Any]) -> str | None:
        """Why `arguments` fail `tool`'s input schema (the first error), or None."""
        check = self.validators.get(tool.name)
        if check is None:
            schema = tool.input_schema
            check = self.validators[tool.name] = jsonschema.validators.validator_for(schema)(schema)
        first = next(check.iter_errors(arguments), None)
        if first is None:
            return None
        where = ".".join(str(p) for p in first.absolute_path) or "arguments"
        return f"{where}: {first.message}"

    def check_result(self, name: str, result: types.CallToolResult) -> None:
        """Raise as the SDK's client does (ClientSession.validate_tool_result) when a result
        that did not fail lacks the structured content its tool's output schema asks for,
        or that content does not conform to it."""
        tool = self.named.get(name)
        schema = tool.output_schema if tool is not None else None
        if result.is_error or schema is None:
            return
        if (
            result.structured_content is None
            and "structured_content" not in result.model_fields_set
        ):
            raise RuntimeError(
                f"Tool {name} has an output schema but did not return structured content"
            )
        check = self.validators.get(f"output {name}")
        if check is None:
            check = self.validators[f"output {name}"] = jsonschema.validators.validator_for(schema)(
                schema
            )
        error = jsonschema.exceptions.best_match(check.iter_errors(result.structured_content))
        if error is not None:
            raise RuntimeError(f"Invalid structured content returned by tool {name}: {error}")


# upstream name -> its tools, as last read
_tools: dict[str, Listing] = {}


@functools.cache
def _tls() -> ssl.SSLContext:
    """The TLS settings of every upstream client, built once: a client is made per call, and
    building them reads the system's certificate authorities each time (bench/README.md)."""
    return httpx2.create_ssl_context()


def _address(upstream: Upstream) -> str:
    return upstream.url or repr(upstream.command)


def _key(upstream: Upstream) -> str:
    """What a kept session was opened with: another address, revision, headers or
    environment is another upstream as far as sessions go."""
    secrets = repr((sorted(expand(upstream.headers).items()), sorted(expand(upstream.env).items())))
    digest = hashlib.sha256(secrets.encode()).hexdigest()
    return f"{upstream.name} {_address(upstream)} {upstream.revision} {digest}"


def _client(upstream: Upstream) -> Client:
    if upstream.command:
        # A process per session (mcp_gateway.sessions keeps it for the next calls) and per
        # tools/list, ended with it (docs/mcp.md says so).
        program, *args = upstream.command
        params = StdioServerParameters(command=program, args=args, env=expand(upstream.env))
        return Client(stdio_client(params), mode=_mode(upstream), cache=None)
    return Client(_http_transport(upstream), mode=_mode(upstream), cache=None)


def _mode(upstream: Upstream) -> str:
    """The SDK client's mode for the upstream's declared revision: the newest it offers
    ("auto": `server/discover`, else the handshake), the 2025 handshake ("legacy"), or a
    stateless revision adopted without asking (the client then answers an `input_required`
    result's questions through its elicitation callback and retries)."""
    if not upstream.revision:
        return "auto"
    return upstream.revision if upstream.revision in MODERN_PROTOCOL_VERSIONS else "legacy"


def _http(upstream: Upstream) -> httpx2.AsyncClient:
    """An HTTP client for the upstream: its headers (secrets from the environment), no limit
    on waiting for an answer (a question to a person may come first)."""
    return httpx2.AsyncClient(
        headers=expand(upstream.headers), timeout=httpx2.Timeout(30, read=None), verify=_tls()
    )


def _plain_http(upstream: Upstream) -> aiohttp.ClientSession:
    """The relay's HTTP client for the upstream (mcp_gateway.plain_http), set as `_http`'s:
    its headers, 30 s to connect, no limit on waiting for an answer, the same TLS settings
    and the proxy the environment names for the upstream's address (read here, once:
    aiohttp's `trust_env` reads the environment again in a thread for every request, which
    cost more than the request). Made in the event loop it serves."""
    return aiohttp.ClientSession(
        headers=expand(upstream.headers),
        timeout=aiohttp.ClientTimeout(total=None, connect=30, sock_read=None),
        connector=aiohttp.TCPConnector(ssl=_tls()),
        proxy=_proxy(upstream.url),
    )


def _proxy(url: str) -> str | None:
    """The proxy the environment's variables (HTTP_PROXY, HTTPS_PROXY, ALL_PROXY, NO_PROXY)
    name for `url`, as the SDK's client (httpx) reads them, or None."""
    parts = urllib.parse.urlsplit(url)
    if parts.hostname and urllib.request.proxy_bypass(parts.hostname):
        return None
    proxies = urllib.request.getproxies()
    return proxies.get(parts.scheme) or proxies.get("all")


@contextlib.asynccontextmanager
async def _http_transport(upstream: Upstream) -> AsyncIterator[Any]:
    """The SDK's streamable HTTP transport on an HTTP client that ends with it."""
    http = _http(upstream)
    async with http, streamable_http_client(upstream.url, http_client=http) as streams:
        yield streams


async def tools(upstream: Upstream) -> list[types.Tool]:
    """The upstream's tools, in its order, kept MCP_TOOLS_CACHE_SECONDS."""
    return (await listing(upstream)).tools


def kept(upstream: Upstream) -> Listing | None:
    """The upstream's tools as last read, if that was within MCP_TOOLS_CACHE_SECONDS from
    its present address."""
    last = kept_named(upstream.name)
    return last if last is not None and last.address == _address(upstream) else None


def kept_named(name: str) -> Listing | None:
    """The tools of the upstream of this name as last read, if that was within
    MCP_TOOLS_CACHE_SECONDS."""
    last = _tools.get(name)
    if last is not None and time.monotonic() - last.read < settings.MCP_TOOLS_CACHE_SECONDS:
        return last
    return None


async def listing(upstream: Upstream) -> Listing:
    """The upstream's tools, kept MCP_TOOLS_CACHE_SECONDS (read again after that)."""
    if (last := kept(upstream)) is not None:
        return last
    listed: list[types.Tool] = []
    async with _client(upstream) as client:
        cursor = None
        while True:
            page = await client.list_tools(cursor=cursor)
            listed.extend(page.tools)
            cursor = page.next_cursor
            if not cursor:
                break
    read = _tools[upstream.name] = Listing(time.monotonic(), _address(upstream), listed)
    return read


async def call(
    upstream: Upstream,
    tool: str,
    arguments: dict[str, Any],
    meta: dict[str, Any] | None = None,
    elicit: ElicitationFnT | None = None,
    relayed: bool = False,
) -> types.CallToolResult:
    """The upstream's answer; an upstream that fails or cannot be reached is a result with
    isError, saying so (the caller records it as the call's outcome). With `elicit`
    (mcp_gateway.elicitation.callback) the client declares the elicitation capability and the
    upstream's questions go to it; without, they are refused. The call is made on a session
    kept open for the upstream (mcp_gateway.sessions); a relayed call to an HTTP upstream
    (mcp_gateway.relay) in plain HTTP on a session of its own (mcp_gateway.plain_http)."""
    if relayed and upstream.url and meta is None:
        try:
            return await _plain(upstream, tool, arguments, elicit)
        except plain_http.InputRequired:
            pass  # the SDK's client asks, and calls again with the answers (below)
        except Exception as e:  # any failure of the upstream is the call's result
            return failed(f"The upstream {upstream.name} failed: {type(e).__name__}: {e}")

    def prime(client: Client) -> None:
        # The client checks a result against the tool's output schema, listing the tools
        # first when its session has not: it gets them from this module's list instead.
        listed = _tools.get(upstream.name)
        if listed and listed.address == _address(upstream):
            client_priming.know_tools(client.session, listed.tools)

    try:
        return await sessions.call(
            _key(upstream), lambda: _client(upstream), prime, tool, arguments, meta, elicit
        )
    except Exception as e:  # any failure of the upstream is the call's result
        return failed(f"The upstream {upstream.name} failed: {type(e).__name__}: {e}")


async def _plain(
    upstream: Upstream, tool: str, arguments: dict[str, Any], elicit: ElicitationFnT | None
) -> types.CallToolResult:
    line = plain_http.line(
        upstream.name,
        _key(upstream),
        upstream.url,
        lambda: _plain_http(upstream),
        upstream.revision,
    )
    result = await plain_http.call(line, tool, arguments, elicit)
    (await listing(upstream)).check_result(tool, result)
    return result


def failed(text: str, **meta: Any) -> types.CallToolResult:
    return types.CallToolResult(
        content=[types.TextContent(type="text", text=text)],
        isError=True,
        **({"_meta": meta} if meta else {}),
    )
