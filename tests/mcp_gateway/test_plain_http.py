"""A relayed call's trip to an HTTP upstream without the SDK's client (mcp_gateway.plain_http),
against the real upstream MCP server: one session for calls one after another and at once,
each call's question answered on its own stream, an upstream that restarts, one that answers
in JSON without a session, and the result checked as the SDK's client checks it."""

import asyncio
import json
from pathlib import Path
from typing import Any

import aiohttp
import mcp_types as types
import pytest
from mcp.shared.exceptions import MCPError

from mcp_gateway import plain_http
from mcp_gateway.forward import Listing, _proxy
from tests.mcp_gateway.conftest import Upstream, run
from tests.mcp_gateway.test_sessions import answer, text


class Wire:
    """The JSON-RPC methods sent, and the session ids they carried, read off the requests
    (aiohttp's request tracing: the headers when a request starts, its body when sent)."""

    def __init__(self) -> None:
        self.methods: list[str] = []
        self.sessions: list[str | None] = []

    async def started(self, _: Any, request: Any, params: aiohttp.TraceRequestStartParams) -> None:
        request.session = params.headers.get("mcp-session-id")

    async def sent(self, _: Any, request: Any, params: aiohttp.TraceRequestChunkSentParams) -> None:
        if params.method == "POST" and params.chunk:
            self.methods.append(json.loads(params.chunk).get("method", "(answer)"))
            self.sessions.append(request.session)

    def http(self) -> aiohttp.ClientSession:
        trace = aiohttp.TraceConfig()
        trace.on_request_start.append(self.started)
        trace.on_request_chunk_sent.append(self.sent)
        return aiohttp.ClientSession(trace_configs=[trace])


def line(wire: Wire, upstream: Upstream, key: str, revision: str = "2025-11-25") -> Any:
    """A line declared `revision` (a session by default: the upstream speaks both)."""
    return plain_http.line(key, f"{key} {upstream.url}", upstream.url, wire.http, revision)


class PlainHttpTestCase:
    @pytest.fixture(autouse=True)
    def setup(self, upstream: Upstream) -> None:
        self.upstream = upstream
        self.wire = Wire()

    def test_calls_one_after_another_share_one_session(self) -> None:
        async def go() -> list[str]:
            to = line(self.wire, self.upstream, "p1")
            return [
                text(await plain_http.call(to, "read_note", {"name": str(n)}, None))
                for n in range(3)
            ]

        assert run(go()) == ["note 0: hello", "note 1: hello", "note 2: hello"]
        assert self.wire.methods == [
            "initialize",
            "notifications/initialized",
            "tools/call",
            "tools/call",
            "tools/call",
        ]
        # Every request after the handshake's first carried the session the upstream gave.
        assert self.wire.sessions[0] is None
        assert len(set(self.wire.sessions[1:])) == 1 and self.wire.sessions[1]

    def test_calls_at_once_share_the_session_and_each_gets_its_own_question(self) -> None:
        async def go() -> list[str]:
            to = line(self.wire, self.upstream, "p2")
            results = await asyncio.gather(
                *(
                    plain_http.call(to, "confirm_name", {"suggested": name}, answer(name))
                    for name in ("alpha", "beta", "gamma")
                )
            )
            return [text(r) for r in results]

        assert run(go()) == [
            f'accept {{"name": "{name}", "overwrite": false}}'
            for name in ("alpha", "beta", "gamma")
        ]
        assert self.wire.methods.count("initialize") == 1, self.wire.methods
        # Each question's answer was posted back: three answers, on the one session.
        assert self.wire.methods.count("(answer)") == 3
        assert len(set(self.wire.sessions[1:])) == 1

    def test_a_question_without_anyone_to_ask_is_refused_and_the_tool_says_so(self) -> None:
        async def go() -> Any:
            to = line(self.wire, self.upstream, "p3")
            return await plain_http.call(to, "confirm_name", {"suggested": "x"}, None)

        # The refusal went back as the answer; the upstream's tool failed on it.
        with pytest.raises(MCPError, match="Method not found"):
            run(go())
        assert self.wire.methods.count("(answer)") == 1

    def test_the_upstreams_failed_result_is_the_result(self) -> None:
        async def go() -> Any:
            to = line(self.wire, self.upstream, "p4")
            return await plain_http.call(to, "no_such_tool", {}, None)

        result = run(go())
        assert result.is_error and text(result) == "Unknown tool: no_such_tool"


class RestartTestCase:
    def test_a_session_the_upstream_forgot_is_opened_again_and_the_call_made_once(
        self, tmp_path: Path
    ) -> None:
        upstream = Upstream(tmp_path)
        upstream.start()
        wire = Wire()

        async def go() -> list[str]:
            to = line(wire, upstream, "p5")
            first = await plain_http.call(to, "delete_file", {"path": "/a"}, None)
            await asyncio.to_thread(upstream.stop)
            await asyncio.to_thread(upstream.start)  # same port, no memory of the session
            second = await plain_http.call(to, "delete_file", {"path": "/b"}, None)
            return [text(first), text(second)]

        try:
            assert run(go()) == ["deleted /a", "deleted /b"]
        finally:
            upstream.stop()
        assert [d["path"] for d in upstream.deleted()] == ["/a", "/b"]
        assert wire.methods.count("initialize") == 2, wire.methods
        # The refused call was sent once more on the new session: three calls, two ran.
        assert wire.methods.count("tools/call") == 3


class JsonUpstreamTestCase:
    def test_a_stateless_upstream_answering_in_json_is_called_without_a_session(
        self, tmp_path: Path
    ) -> None:
        upstream = Upstream(tmp_path, mode="json")
        upstream.start()
        wire = Wire()

        async def go() -> list[str]:
            to = line(wire, upstream, "p6")
            return [
                text(await plain_http.call(to, "read_note", {"name": n}, None)) for n in ("a", "b")
            ]

        try:
            assert run(go()) == ["note a: hello", "note b: hello"]
        finally:
            upstream.stop()
        assert wire.methods.count("tools/call") == 2
        assert set(wire.sessions) == {None}


class DiscoverTestCase:
    """An upstream declared without a revision is asked which it speaks, as the official
    client asks (`server/discover`), once per line."""

    def calls(self, upstream: Upstream, wire: Wire, key: str) -> list[str]:
        async def go() -> list[str]:
            to = line(wire, upstream, key, revision="")
            return [
                text(await plain_http.call(to, "read_note", {"name": n}, None)) for n in ("a", "b")
            ]

        return run(go())

    def test_an_upstream_of_both_revisions_is_called_without_a_session(
        self, upstream: Upstream
    ) -> None:
        wire = Wire()
        assert self.calls(upstream, wire, "d1") == ["note a: hello", "note b: hello"]
        assert wire.methods == ["server/discover", "tools/call", "tools/call"]
        assert set(wire.sessions) == {None}

    def test_an_upstream_of_the_2025_revisions_only_gets_a_session(self, tmp_path: Path) -> None:
        old = Upstream(tmp_path, mode="2025")
        old.start()
        wire = Wire()
        try:
            assert self.calls(old, wire, "d2") == ["note a: hello", "note b: hello"]
        finally:
            old.stop()
        assert wire.methods == [
            "server/discover",
            "initialize",
            "notifications/initialized",
            "tools/call",
            "tools/call",
        ]
        assert wire.sessions[-1] and len(set(wire.sessions[2:])) == 1

    def test_an_upstream_downgraded_since_it_was_asked_is_asked_again_and_runs_the_call_once(
        self, tmp_path: Path
    ) -> None:
        both = Upstream(tmp_path)
        old = Upstream(tmp_path, mode="2025")
        old.port, old.url = both.port, both.url  # the same server, restarted older
        both.start()
        wire = Wire()

        async def go() -> list[str]:
            to = line(wire, both, "d4", revision="")
            said = [text(await plain_http.call(to, "read_note", {"name": "a"}, None))]
            await asyncio.to_thread(both.stop)
            await asyncio.to_thread(old.start)
            said.append(text(await plain_http.call(to, "delete_file", {"path": "/x"}, None)))
            return said

        try:
            assert run(go()) == ["note a: hello", "deleted /x"]
        finally:
            both.stop()
            old.stop()
        assert wire.methods == [
            "server/discover",
            "tools/call",
            "tools/call",  # refused for its revision: not run
            "server/discover",
            "initialize",
            "notifications/initialized",
            "tools/call",
        ]
        assert [c["path"] for c in old.deleted()] == ["/x"]

    def test_a_declared_revision_refused_is_the_call_s_error(self, tmp_path: Path) -> None:
        old = Upstream(tmp_path, mode="2025")
        old.start()
        wire = Wire()

        async def go() -> Any:
            to = line(wire, old, "d5", revision="2026-07-28")
            return await plain_http.call(to, "delete_file", {"path": "/y"}, None)

        try:
            with pytest.raises(MCPError, match="refuses its declared revision 2026-07-28"):
                run(go())
        finally:
            old.stop()
        assert wire.methods == ["tools/call"] and old.deleted() == []

    def test_a_tool_that_asks_over_a_session_fails_without_one_as_for_the_official_client(
        self, upstream: Upstream
    ) -> None:
        async def go() -> Any:
            to = line(Wire(), upstream, "d3", revision="")
            return await plain_http.call(to, "confirm_name", {"suggested": "x"}, answer("x"))

        with pytest.raises(MCPError, match="no back-channel"):
            run(go())


class ResultCheckTestCase:
    """The result is checked against the tool's output schema as the SDK's client checks it."""

    def listing(self) -> Listing:
        tool = types.Tool(
            name="read_note",
            input_schema={"type": "object"},
            output_schema={
                "type": "object",
                "properties": {"result": {"type": "string"}},
                "required": ["result"],
            },
        )
        return Listing(0.0, "here", [tool])

    def test_conforming_content_passes(self) -> None:
        ok = types.CallToolResult(content=[], structured_content={"result": "x"})
        self.listing().check_result("read_note", ok)

    def test_missing_or_wrong_content_is_refused(self) -> None:
        with pytest.raises(RuntimeError, match="did not return structured content"):
            self.listing().check_result("read_note", types.CallToolResult(content=[]))
        wrong = types.CallToolResult(content=[], structured_content={"result": 5})
        with pytest.raises(RuntimeError, match="Invalid structured content"):
            self.listing().check_result("read_note", wrong)

    def test_a_failed_result_is_not_checked(self) -> None:
        failed = types.CallToolResult(content=[], is_error=True)
        self.listing().check_result("read_note", failed)


class ProxyTestCase:
    """The relay's client takes the proxy the environment names, as the SDK's client does."""

    def test_the_environment_names_the_proxy_and_its_exceptions(
        self, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        for name in ("http_proxy", "https_proxy", "all_proxy", "no_proxy"):
            monkeypatch.delenv(name, raising=False)
            monkeypatch.delenv(name.upper(), raising=False)
        assert _proxy("http://files.internal/mcp") is None
        monkeypatch.setenv("HTTP_PROXY", "http://proxy.internal:3128")
        monkeypatch.setenv("NO_PROXY", "127.0.0.1,localhost")
        assert _proxy("http://files.internal/mcp") == "http://proxy.internal:3128"
        assert _proxy("http://127.0.0.1:9301/mcp") is None
        assert _proxy("https://files.internal/mcp") is None
        monkeypatch.setenv("ALL_PROXY", "http://all.internal:3128")
        assert _proxy("https://files.internal/mcp") == "http://all.internal:3128"
