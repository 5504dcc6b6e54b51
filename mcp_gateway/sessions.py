"""Upstream sessions kept open between calls.

A relayed call used to open a session of its own: the 2025 handshake (`initialize`,
`notifications/initialized`), the call, and a `tools/list` (the client checks a result against
the tool's output schema) on a new connection: four requests where a direct client makes one
(bench/README.md, issue 30). Here a session, once open, serves one call after another.

- **One call at a time per session.** An upstream asks its client questions
  (`elicitation/create`) on the session, not on the call, so a session shared by calls in
  flight could not tell whose question it is. A call borrows an idle session (or opens one)
  and gives it back when it is over; eight callers at once hold eight sessions.
- **A task owns each session.** The SDK's client is entered and left in one task (its
  transport runs a task group), so a session lives in a task of its own, which makes the
  calls it is handed. A caller that gives up (cancelled: the client left, a time limit) ends
  the session with its call, as closing a call's own client did.
- **Per event loop.** Sessions belong to the loop that opened them: daphne's, or a Celery
  worker's lasting loop (infra.aio.process_loop), on which its tasks make their calls, so a
  worker's next approved call finds the session its last one used.
- **A session the upstream forgot** (it restarted: HTTP 404, "Session not found", refused
  before the tool runs) is dropped with every idle one of that upstream, and the call is made
  once more on a new session. Any other failure is the call's result, never retried: the
  upstream may have run it.
"""

import asyncio
import time
import weakref
from collections.abc import Callable
from typing import Any

import mcp_types as types
from mcp import Client
from mcp.client.session import ElicitationFnT
from mcp.shared.exceptions import MCPError

IDLE_PER_UPSTREAM = 16  # sessions kept open per upstream and loop beyond that are closed
IDLE_SECONDS = 300  # a session unused this long is closed (an upstream edited or gone keeps none)
_Job = tuple[
    str, dict[str, Any], dict[str, Any] | None, ElicitationFnT | None, "asyncio.Future[Any]"
]


class _Session:
    """One upstream session, open in a task of its own, making the calls it is handed."""

    def __init__(self, open_client: Callable[[], Client], prime: Callable[[Client], None]) -> None:
        self.jobs: asyncio.Queue[_Job | None] = asyncio.Queue()
        self.ready: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self.dead = False
        self.calls = 0
        self.used = time.monotonic()
        self._asks: ElicitationFnT | None = None
        self.task = asyncio.create_task(self._run(open_client, prime))

    async def _ask(self, context: Any, params: Any) -> Any:
        """The upstream's question goes to the call the session is making now."""
        asks = self._asks
        if asks is None:
            return types.ErrorData(code=types.INVALID_REQUEST, message="Elicitation not supported")
        return await asks(context, params)

    async def _run(
        self, open_client: Callable[[], Client], prime: Callable[[Client], None]
    ) -> None:
        try:
            client = open_client()
            client.elicitation_callback = self._ask  # read when the client connects
            async with client:
                self.ready.set_result(None)
                while (job := await self.jobs.get()) is not None:
                    tool, arguments, meta, asks, answer = job
                    self._asks = asks
                    try:
                        prime(client)
                        result = await client.call_tool(tool, arguments, meta=meta)
                    except Exception as e:
                        if not answer.done():
                            answer.set_exception(e)
                        return  # a session that failed a call is not used again
                    finally:
                        self._asks = None
                    if not answer.done():
                        answer.set_result(result)
        except Exception as e:
            if not self.ready.done():
                self.ready.set_exception(e)
        finally:
            self.dead = True
            if not self.ready.done():
                self.ready.set_exception(ConnectionError("the session ended"))

    async def call(
        self,
        tool: str,
        arguments: dict[str, Any],
        meta: dict[str, Any] | None,
        asks: ElicitationFnT | None,
    ) -> types.CallToolResult:
        answer: asyncio.Future[types.CallToolResult] = asyncio.get_running_loop().create_future()
        try:
            await self.ready
            self.calls += 1
            self.jobs.put_nowait((tool, arguments, meta, asks, answer))
            return await answer
        except asyncio.CancelledError:
            self.close(now=True)  # the caller gave up: the call ends with its session
            raise

    def close(self, now: bool = False) -> None:
        self.dead = True
        if now:
            self.task.cancel()
        else:
            self.jobs.put_nowait(None)


# event loop -> upstream key -> its idle sessions
_idle: "weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, dict[str, list[_Session]]]" = (
    weakref.WeakKeyDictionary()
)


def _pool(key: str) -> list[_Session]:
    return _idle.setdefault(asyncio.get_running_loop(), {}).setdefault(key, [])


def drop(key: str) -> None:
    """Close this loop's idle sessions of upstream `key` (it restarted, or was changed)."""
    pool = _pool(key)
    while pool:
        pool.pop().close()


def _close_idle() -> None:
    """Close this loop's sessions unused for IDLE_SECONDS, of every upstream."""
    stale = time.monotonic() - IDLE_SECONDS
    for pool in _idle.get(asyncio.get_running_loop(), {}).values():
        for session in [s for s in pool if s.used < stale]:
            pool.remove(session)
            session.close()


def _forgotten(e: BaseException) -> bool:
    """Did the upstream refuse the call for not knowing the session (before running it)?"""
    # The transport asks for a new session in these words when the server answers 404 ("Session
    # terminated"); the SDK's server says "Session not found" in that 404's body, which wins.
    message = e.error.message.lower() if isinstance(e, MCPError) else ""
    return "session" in message and ("not found" in message or "terminated" in message)


async def call(
    key: str,
    open_client: Callable[[], Client],
    prime: Callable[[Client], None],
    tool: str,
    arguments: dict[str, Any],
    meta: dict[str, Any] | None = None,
    asks: ElicitationFnT | None = None,
) -> types.CallToolResult:
    """Call `tool` on upstream `key` (sessions opened by `open_client`, primed by `prime`
    before each call) on a session of this loop's. Raises what the call raised."""
    _close_idle()
    for attempt in (1, 2):
        pool = _pool(key)
        while pool and pool[-1].dead:
            pool.pop()
        session = pool.pop() if pool else _Session(open_client, prime)
        reused = session.calls > 0
        try:
            result = await session.call(tool, arguments, meta, asks)
        except Exception as e:
            session.close()
            if attempt == 1 and reused and _forgotten(e):
                drop(key)
                continue
            raise
        session.used = time.monotonic()
        if session.dead:
            session.close()
        elif len(pool) < IDLE_PER_UPSTREAM:
            pool.append(session)
        else:
            session.close()
        return result
    raise AssertionError("unreachable")  # the loop returns or raises


def close_all() -> None:
    """Close every idle session of this loop, and forget the loop (a loop about to end: its
    pool would hold it, through the sessions' tasks, past its end)."""
    loop = asyncio.get_running_loop()
    for key in list(_idle.get(loop, {})):
        drop(key)
    _idle.pop(loop, None)
