"""LangGraph: tools that ask the gateway's reviewers first, pausing the graph with interrupt().

    gw = Gateway(URL, TOKEN, agent="billing-graph")

    @require_approval(gw, prompt="Pay {amount} to {to}?")
    def pay(amount: int, to: str) -> str: ...

    def node(state):                      # any node of a graph compiled with a checkpointer
        return {"receipt": pay(120, "ACME")}

    result = run(graph, inputs, config, gw)   # invoke, wait for decisions, resume, until done

Inside a node, a call of `pay` raises the gateway request (its idempotency key is made from
the graph's thread id, the node's task and the call's arguments, so the same request on every
re-run of the node) and calls interrupt() with the request: the graph stops. LangGraph runs the
node again from its start when it is resumed; the call then finds the same request, reads its
decision from the gateway (not from the resume value, which only wakes it), and on approval
runs the function as a LangGraph task, with the approved (possibly edited) arguments. A task's
result is checkpointed, so a later re-run of the node (another interrupt after it) does not run
the function again. Rejected or timed out, the call raises Rejected or TimedOut in the node.

Each call pauses once, even when the gateway decided at once (a policy rule): interrupts are
matched to resume values by their order in the node, so a call may not pause on one run of
the node and not on another. run() resumes such a pause at once.

To resume from a webhook instead of waiting: `pending(result)` lists the requests a paused
graph waits on; once the gateway's webhook says they are decided, `resume(graph, result,
config, gw)` goes on.
"""

import functools
import hashlib
import inspect
import json
from collections.abc import Callable
from typing import Any, TypeVar, cast

from langgraph.config import get_config
from langgraph.func import task
from langgraph.types import Command, interrupt

from approval_client.client import Gateway, Request, StillPending
from approval_client.decorators import _arguments, _prompt, description

F = TypeVar("F", bound=Callable[..., Any])
MARK = "gateway_request"


def _key(tool: str, arguments: dict[str, Any]) -> str:
    """The same for every run of this call in this node of this graph thread."""
    configurable = get_config().get("configurable", {})
    where = [
        str(configurable.get("thread_id", "")),
        str(configurable.get("checkpoint_ns", "")),
        tool,
        json.dumps(arguments, sort_keys=True, separators=(",", ":"), default=str),
    ]
    return "lg-" + hashlib.sha256("\x1f".join(where).encode()).hexdigest()


def require_approval(
    gateway: Gateway,
    *,
    tool: str | None = None,
    prompt: str | Callable[..., str] | None = None,
    schema: dict[str, Any] | None = None,
    **options: Any,
) -> Callable[[F], F]:
    """A function that, called inside a LangGraph node, runs only once the gateway's
    reviewers approved it (see the module's docstring); `options` go to raise_request."""

    def decorate(fn: F) -> F:
        signature = inspect.signature(fn)
        name = tool or fn.__name__

        # The run itself is a task: its result is kept in the checkpoint, so no re-run of
        # the node runs the function again.
        @task(name=f"approved:{name}")
        def approved_call(arguments: dict[str, Any]) -> Any:
            return fn(**arguments)

        @functools.wraps(fn)
        def call(*args: Any, **kwargs: Any) -> Any:
            arguments = _arguments(signature, args, kwargs)
            made = gateway.raise_request(
                name,
                arguments,
                key=_key(name, arguments),
                prompt=_prompt(prompt, arguments),
                schema=schema,
                description=description(fn),
                **options,
            )
            interrupt({MARK: made.id, "tool": name, "arguments": arguments})
            decided = gateway.get(made.id)
            if decided.pending:
                raise StillPending(decided)
            decided.outcome()
            return approved_call(decided.arguments or arguments).result()

        return cast(F, call)

    return decorate


def pending(result: dict[str, Any]) -> list[tuple[str, str]]:
    """(interrupt id, gateway request id) of each pause a graph's result waits on."""
    found = []
    for paused in result.get("__interrupt__", ()):
        value = getattr(paused, "value", None)
        if isinstance(value, dict) and MARK in value:
            found.append((paused.id, value[MARK]))
    return found


def resume(
    graph: Any, result: dict[str, Any], config: dict[str, Any], gateway: Gateway, **wait: Any
) -> dict[str, Any]:
    """Wait for the decision of every request the graph waits on, then resume it once."""
    answers: dict[str, Any] = {}
    for interrupt_id, request_id in pending(result):
        decided: Request = gateway.wait(request_id, **wait)
        answers[interrupt_id] = decided.raw
    return graph.invoke(Command(resume=answers), config)


def run(
    graph: Any, inputs: Any, config: dict[str, Any], gateway: Gateway, **wait: Any
) -> dict[str, Any]:
    """Invoke the graph and resume it after each set of decisions, until it stops for
    something other than the gateway, or finishes. `wait` goes to Gateway.wait (within)."""
    result = graph.invoke(inputs, config)
    while pending(result):
        result = resume(graph, result, config, gateway, **wait)
    return result
