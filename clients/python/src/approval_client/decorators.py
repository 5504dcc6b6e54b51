"""require_approval and ask_human: a reviewer's decision in front of any function."""

import functools
import inspect
from collections.abc import Callable
from typing import Any, TypeVar, cast

from approval_client.client import AsyncGateway, Gateway

F = TypeVar("F", bound=Callable[..., Any])


def _arguments(signature: inspect.Signature, args: tuple, kwargs: dict) -> dict[str, Any]:
    bound = signature.bind(*args, **kwargs)
    bound.apply_defaults()
    return dict(bound.arguments)


def _prompt(prompt: str | Callable[..., str] | None, arguments: dict[str, Any]) -> str:
    if prompt is None:
        return ""
    if callable(prompt):
        return prompt(**arguments)
    return prompt.format(**arguments)


def description(fn: Callable[..., Any]) -> str:
    """What the card says the tool does: the first paragraph of its docstring."""
    return (inspect.getdoc(fn) or "").split("\n\n")[0].strip()


def require_approval(
    gateway: Gateway | AsyncGateway,
    *,
    tool: str | None = None,
    prompt: str | Callable[..., str] | None = None,
    schema: dict[str, Any] | None = None,
    key: Callable[..., str] | None = None,
    within: float | None = None,
    **options: Any,
) -> Callable[[F], F]:
    """Each call of the decorated function first asks the gateway's reviewers: approved, it
    runs with the arguments they approved (edited ones included) and returns its result;
    rejected or timed out, it does not run and Rejected or TimedOut is raised.

    The function's arguments (bound by name, defaults applied) are the request's arguments,
    so they must be JSON. `prompt` is a format string over them (or a function of them);
    `key(**arguments)` gives the idempotency key (default: a new one per call); `options`
    go to raise_request (timeout, on_timeout, policy). An async function needs an
    AsyncGateway, a plain one a Gateway."""

    def decorate(fn: F) -> F:
        signature = inspect.signature(fn)
        name = tool or fn.__name__

        def request_options(arguments: dict[str, Any]) -> dict[str, Any]:
            return {
                "description": description(fn),
                "key": key(**arguments) if key else None,
                "prompt": _prompt(prompt, arguments),
                "schema": schema,
                "within": within,
                **options,
            }

        if inspect.iscoroutinefunction(fn):
            if not isinstance(gateway, AsyncGateway):
                raise TypeError(f"{fn.__name__} is async: give require_approval an AsyncGateway")

            @functools.wraps(fn)
            async def run_async(*args: Any, **kwargs: Any) -> Any:
                arguments = _arguments(signature, args, kwargs)
                approved = await gateway.request_approval(
                    name, arguments, **request_options(arguments)
                )
                return await fn(**(approved.arguments or arguments))

            return cast(F, run_async)
        if not isinstance(gateway, Gateway):
            raise TypeError(f"{fn.__name__} is not async: give require_approval a Gateway")

        @functools.wraps(fn)
        def run(*args: Any, **kwargs: Any) -> Any:
            arguments = _arguments(signature, args, kwargs)
            approved = gateway.request_approval(name, arguments, **request_options(arguments))
            return fn(**(approved.arguments or arguments))

        return cast(F, run)

    return decorate


def ask_human(gateway: Gateway, question: str, **options: Any) -> str:
    """Ask the reviewers a question; their answer (raises TimedOut or Rejected when nobody
    answered by the deadline or the run was cancelled)."""
    return gateway.ask(question, **options)


async def ask_human_async(gateway: AsyncGateway, question: str, **options: Any) -> str:
    return await gateway.ask(question, **options)
