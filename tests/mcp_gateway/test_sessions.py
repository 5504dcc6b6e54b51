"""Upstream sessions kept open between calls (mcp_gateway.sessions), against the real upstream
MCP server: what goes over the wire, whose question is whose, and an upstream that restarts.
And what mcp_gateway.client_priming buys, the one use of the SDK's private names (its tripwire
is in tests/test_tripwires.py)."""

import asyncio
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx2
import mcp_types as types
import pytest
from mcp import Client
from mcp.client.streamable_http import streamable_http_client

from mcp_gateway import client_priming, sessions
from tests.mcp_gateway.conftest import Upstream, run


class Wire:
    """The JSON-RPC methods a client sent, read off its HTTP requests."""

    def __init__(self) -> None:
        self.methods: list[str] = []

    async def saw(self, request: httpx2.Request) -> None:
        if request.method == "POST":
            self.methods.append(json.loads(request.content).get("method", "(answer)"))

    def opener(self, url: str) -> Callable[[], Client]:
        def open_client() -> Client:
            http = httpx2.AsyncClient(event_hooks={"request": [self.saw]})
            return Client(streamable_http_client(url, http_client=http), mode="legacy", cache=None)

        return open_client


def no_priming(client: Client) -> None:
    pass


def answer(name: str) -> Any:
    async def asks(context: Any, params: Any) -> types.ElicitResult:
        await asyncio.sleep(0.2)  # both questions are out before either is answered
        return types.ElicitResult(action="accept", content={"name": name, "overwrite": False})

    return asks


def text(result: types.CallToolResult) -> str:
    return "".join(c.text for c in result.content if isinstance(c, types.TextContent))


class SessionsTestCase:
    @pytest.fixture(autouse=True)
    def setup(self, upstream: Upstream) -> None:
        self.upstream = upstream
        self.wire = Wire()
        self.open = self.wire.opener(upstream.url)

    def test_calls_one_after_another_share_one_session(self) -> None:
        async def go() -> list[str]:
            done = []
            for n in range(3):
                result = await sessions.call(
                    "u1", self.open, no_priming, "read_note", {"name": str(n)}
                )
                done.append(text(result))
            sessions.close_all()
            return done

        assert run(go()) == ["note 0: hello", "note 1: hello", "note 2: hello"]
        assert self.wire.methods.count("initialize") == 1, self.wire.methods
        assert self.wire.methods.count("tools/call") == 3

    def test_calls_at_once_each_have_a_session_and_get_their_own_questions(self) -> None:
        async def go() -> list[str]:
            results = await asyncio.gather(
                *(
                    sessions.call(
                        "u2",
                        self.open,
                        no_priming,
                        "confirm_name",
                        {"suggested": name},
                        None,
                        answer(name),
                    )
                    for name in ("alpha", "beta", "gamma")
                )
            )
            sessions.close_all()
            return [text(r) for r in results]

        assert run(go()) == [
            f'accept {{"name": "{name}", "overwrite": false}}'
            for name in ("alpha", "beta", "gamma")
        ]
        assert self.wire.methods.count("initialize") == 3, self.wire.methods

    def test_a_caller_that_gives_up_ends_its_session(self) -> None:
        async def go() -> list[str]:
            async def never(context: Any, params: Any) -> Any:
                await asyncio.sleep(60)

            with pytest.raises(TimeoutError):
                await asyncio.wait_for(
                    sessions.call(
                        "u3", self.open, no_priming, "confirm_name", {"suggested": "x"}, None, never
                    ),
                    1,
                )
            result = await sessions.call(
                "u3", self.open, no_priming, "read_note", {"name": "after"}
            )
            sessions.close_all()
            return [text(result)]

        assert run(go()) == ["note after: hello"]
        # The abandoned session is not given to the next call: it opened one of its own.
        assert self.wire.methods.count("initialize") == 2, self.wire.methods

    def test_a_session_idle_too_long_is_closed(self, monkeypatch: pytest.MonkeyPatch) -> None:
        monkeypatch.setattr(sessions, "IDLE_SECONDS", 0.5)

        async def go() -> None:
            await sessions.call("u5", self.open, no_priming, "read_note", {"name": "a"})
            await asyncio.sleep(1)
            await sessions.call("u5", self.open, no_priming, "read_note", {"name": "b"})
            sessions.close_all()

        run(go())
        assert self.wire.methods.count("initialize") == 2, self.wire.methods


class RestartTestCase:
    def test_a_session_the_upstream_forgot_is_opened_again_and_the_call_made_once(
        self, tmp_path: Path
    ) -> None:
        upstream = Upstream(tmp_path)
        upstream.start()
        wire = Wire()
        open_client = wire.opener(upstream.url)

        async def go() -> list[str]:
            first = await sessions.call(
                "u4", open_client, no_priming, "delete_file", {"path": "/a"}
            )
            await asyncio.to_thread(upstream.stop)
            await asyncio.to_thread(upstream.start)  # same port, no memory of the session
            second = await sessions.call(
                "u4", open_client, no_priming, "delete_file", {"path": "/b"}
            )
            sessions.close_all()
            return [text(first), text(second)]

        try:
            assert run(go()) == ["deleted /a", "deleted /b"]
        finally:
            upstream.stop()
        assert [d["path"] for d in upstream.deleted()] == ["/a", "/b"]
        assert wire.methods.count("initialize") == 2, wire.methods


class PrimingTestCase:
    """The SDK takes a listing handed to its session, and then checks a result with no
    tools/list of its own, against the real upstream. If an SDK upgrade breaks this, the
    relayed calls are right but slower; this test says where."""

    @pytest.mark.parametrize("primed", [True, False])
    def test_a_primed_session_checks_the_result_without_listing(
        self, upstream: Upstream, primed: bool
    ) -> None:
        wire = Wire()

        async def go() -> tuple[str, list[str]]:
            async with wire.opener(upstream.url)() as client:
                listed = (await client.list_tools()).tools
            async with wire.opener(upstream.url)() as client:
                if primed:
                    client_priming.know_tools(client.session, listed)
                before = len(wire.methods)
                result = await client.call_tool("read_note", {"name": "n"})
                return text(result), [
                    m for m in wire.methods[before:] if not m.startswith("notifications/")
                ]

        said, methods = run(go())
        assert said == "note n: hello"
        assert methods == (["tools/call"] if primed else ["tools/call", "tools/list"])
