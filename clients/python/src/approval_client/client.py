"""The gateway's external requests over HTTP, sync (Gateway) and async (AsyncGateway).

Both raise a request with an idempotency key chosen before the first attempt, so a retry
after a lost answer finds the request it made instead of making another; both retry
connection errors, 502-504 and 429 (after the Retry-After the gateway sends) with
exponential backoff and jitter. Waiting is a loop of long polls (GET ?wait=N).
"""

import asyncio
import random
import time
import uuid
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

import httpx

from approval_client import receipts

CONFIRMATION = "confirmation"
INPUT = "input"
# The longest one long poll waits (the gateway answers by then, at most 60 s).
POLL_SECONDS = 30
RETRY_STATUSES = (429, 502, 503, 504)


class GatewayError(Exception):
    """The gateway refused the call (a 4xx other than 429, or a 5xx after the retries)."""

    def __init__(self, status: int, body: dict[str, Any]) -> None:
        self.status = status
        self.body = body
        self.code = str(body.get("error", "error"))
        self.detail = str(body.get("detail", ""))
        self.fields: dict[str, str] = body.get("fields") or {}
        super().__init__(f"{status} {self.code}: {self.detail}")


class Rejected(Exception):
    """A reviewer rejected the request (or the run was cancelled)."""

    def __init__(self, request: "Request") -> None:
        self.request = request
        who = f" by {request.decided_by}" if request.decided_by else ""
        why = f": {request.reason}" if request.reason else ""
        super().__init__(f"{request.tool} was {request.status}{who}{why}")


class TimedOut(Rejected):
    """Nobody decided before the deadline, and the default action was to reject."""


class StillPending(Exception):
    """The request was not decided within the time the caller would wait."""

    def __init__(self, request: "Request") -> None:
        self.request = request
        super().__init__(f"{request.tool}: no decision yet (request {request.id})")


@dataclass(frozen=True)
class Request:
    """A request as the gateway answers it (`raw` holds every field it sent)."""

    id: str
    thread: str
    tool: str
    status: str  # pending, approved, rejected, timed_out, cancelled
    approved: bool | None
    arguments: dict[str, Any] | None  # what to run the tool with, once approved
    input: dict[str, Any]
    response: str | None
    reason: str | None
    decided_by: str | None
    idempotency_key: str
    raw: dict[str, Any] = field(repr=False, compare=False)
    # The decision's signed receipt (a compact JWS); None while pending.
    receipt: str | None = field(default=None, repr=False, compare=False)

    @classmethod
    def of(cls, body: dict[str, Any]) -> "Request":
        return cls(
            id=body["id"],
            thread=body["thread"],
            tool=body["tool"],
            status=body["status"],
            approved=body.get("approved"),
            arguments=body.get("arguments"),
            input=body.get("input") or {},
            response=body.get("response"),
            reason=body.get("reason"),
            decided_by=body.get("decided_by"),
            idempotency_key=body.get("idempotency_key", ""),
            raw=body,
            receipt=body.get("receipt"),
        )

    @property
    def pending(self) -> bool:
        return self.status == "pending"

    def verify_receipt(self, jwks: dict[str, Any]) -> dict[str, Any]:
        """Check the decision's receipt with the gateway's public keys (`jwks`: the JSON of
        its /.well-known/jwks.json, e.g. Gateway.jwks()) before acting on it: signed by one
        of them, about this request, with this outcome and, once approved, these arguments.
        Returns the receipt's claims (who decided: `claims["decider"]`); raises
        ReceiptInvalid otherwise."""
        if not self.receipt:
            raise receipts.ReceiptInvalid(f"request {self.id} has no receipt ({self.status})")
        claims = receipts.verify(self.receipt, jwks)
        decision = claims.get("decision") or {}
        if claims.get("suspension") != self.id:
            raise receipts.ReceiptInvalid(f"the receipt is about {claims.get('suspension')}")
        if decision.get("status") != self.status or decision.get("approved") != self.approved:
            raise receipts.ReceiptInvalid(
                f"the receipt says {decision.get('status')}, the answer says {self.status}"
            )
        if self.arguments is not None and claims.get("args_hash") != receipts.canonical_hash(
            self.arguments
        ):
            raise receipts.ReceiptInvalid("the arguments are not the ones the receipt approved")
        return claims

    def outcome(self) -> "Request":
        """This request if it was approved; raises Rejected or TimedOut otherwise."""
        if self.pending:
            raise StillPending(self)
        if self.approved:
            return self
        if self.status == "timed_out":
            raise TimedOut(self)
        raise Rejected(self)


def new_key() -> str:
    return uuid.uuid4().hex


@dataclass
class Retry:
    """How calls are tried again: `attempts` in all, waiting `backoff` × 2^n (at most
    `max_backoff`, with jitter) after a connection error or a 502-504, and what Retry-After
    says (at most `max_backoff`) after a 429."""

    attempts: int = 6
    backoff: float = 0.2
    max_backoff: float = 10.0

    def delay(self, attempt: int, response: httpx.Response | None) -> float:
        if response is not None and response.status_code == 429:
            try:
                return min(self.max_backoff, max(0.0, float(response.headers["Retry-After"])))
            except (KeyError, ValueError):
                pass
        return min(self.max_backoff, self.backoff * 2**attempt) * random.uniform(0.5, 1.0)


def _body(
    agent: str,
    run_id: str,
    tool: str,
    arguments: dict[str, Any],
    *,
    key: str,
    schema: dict[str, Any] | None,
    prompt: str,
    kind: str,
    timeout: int | None,
    on_timeout: str,
    policy: str | None,
    description: str | None = None,
    summary: str | None = None,
    reject_reasons: list[str] | None = None,
) -> dict[str, Any]:
    body: dict[str, Any] = {
        "agent": agent,
        "run_id": run_id,
        "tool": tool,
        "arguments": arguments,
        "prompt": prompt,
        "kind": kind,
        "on_timeout": on_timeout,
        "idempotency_key": key,
    }
    if schema is not None:
        body["schema"] = schema
    if timeout is not None:
        body["timeout"] = timeout
    if policy is not None:
        body["policy"] = policy
    if description:
        body["description"] = description
    if summary is not None:
        body["summary"] = summary
    if reject_reasons is not None:
        body["reject_reasons"] = reject_reasons
    return body


def _decode(response: httpx.Response) -> dict[str, Any]:
    try:
        body = response.json()
    except ValueError:
        body = {"error": "bad_response", "detail": response.text[:500]}
    if response.status_code >= 400:
        raise GatewayError(response.status_code, body)
    return body


class Gateway:
    """A synchronous client for one outside agent (`agent`) and one of its runs (`run_id`;
    a new one per client unless given)."""

    def __init__(
        self,
        url: str,
        token: str,
        agent: str,
        run_id: str | None = None,
        *,
        retry: Retry | None = None,
        transport: httpx.BaseTransport | None = None,
        sleep: Callable[[float], None] = time.sleep,
    ) -> None:
        self.agent = agent
        self.run_id = run_id or new_key()
        self.retry = retry or Retry()
        self.sleep = sleep
        self.http = httpx.Client(
            base_url=url.rstrip("/"),
            headers={"Authorization": f"Bearer {token}"},
            timeout=httpx.Timeout(10.0, read=POLL_SECONDS + 30),
            transport=transport,
        )

    def close(self) -> None:
        self.http.close()

    def __enter__(self) -> "Gateway":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _call(self, method: str, path: str, **kwargs: Any) -> dict[str, Any]:
        for attempt in range(self.retry.attempts):
            last = attempt == self.retry.attempts - 1
            try:
                response = self.http.request(method, path, **kwargs)
            except httpx.TransportError:
                if last:
                    raise
                self.sleep(self.retry.delay(attempt, None))
                continue
            if response.status_code in RETRY_STATUSES and not last:
                self.sleep(self.retry.delay(attempt, response))
                continue
            return _decode(response)
        raise AssertionError("unreachable: the last attempt returns or raises")

    def jwks(self) -> dict[str, Any]:
        """The gateway's public keys (/.well-known/jwks.json), for Request.verify_receipt."""
        return self._call("GET", "/.well-known/jwks.json")

    def raise_request(
        self,
        tool: str,
        arguments: dict[str, Any] | None = None,
        *,
        key: str | None = None,
        schema: dict[str, Any] | None = None,
        prompt: str = "",
        kind: str = CONFIRMATION,
        timeout: int | None = None,
        on_timeout: str = "reject",
        policy: str | None = None,
        description: str | None = None,
        summary: str | None = None,
        reject_reasons: list[str] | None = None,
    ) -> Request:
        """Raise a request (once per `key`, however often it is retried); returns it as the
        gateway made it, pending unless a policy rule decided it at once. `description`,
        `summary` (a template over the arguments, "Pay {amount} to {to}") and
        `reject_reasons` are what the reviewer's card shows."""
        body = _body(
            self.agent,
            self.run_id,
            tool,
            arguments or {},
            key=key or new_key(),
            schema=schema,
            prompt=prompt,
            kind=kind,
            timeout=timeout,
            on_timeout=on_timeout,
            policy=policy,
            description=description,
            summary=summary,
            reject_reasons=reject_reasons,
        )
        return Request.of(self._call("POST", "/api/requests", json=body))

    def get(self, request_id: str, wait: int = 0) -> Request:
        """The request now, or once decided within `wait` seconds (a long poll)."""
        params = {"wait": str(wait)} if wait else {}
        return Request.of(self._call("GET", f"/api/requests/{request_id}", params=params))

    def wait(self, request: Request | str, within: float | None = None) -> Request:
        """Long polls until the request is decided; raises StillPending after `within`
        seconds (None: as long as it takes; the gateway's deadline ends every request)."""
        request_id = request if isinstance(request, str) else request.id
        end = None if within is None else time.monotonic() + within
        while True:
            left = (
                POLL_SECONDS if end is None else max(0, min(POLL_SECONDS, end - time.monotonic()))
            )
            found = self.get(request_id, wait=max(1, int(left)))
            if not found.pending:
                return found
            if end is not None and time.monotonic() >= end:
                raise StillPending(found)

    def request_approval(self, tool: str, arguments: dict[str, Any], **options: Any) -> Request:
        """Raise and wait: the approved request (its `arguments` are what to run with);
        raises Rejected or TimedOut."""
        within = options.pop("within", None)
        return self.wait(self.raise_request(tool, arguments, **options), within).outcome()

    def ask(self, question: str, *, key: str | None = None, **options: Any) -> str:
        """Ask the reviewers a question and wait for the answer."""
        within = options.pop("within", None)
        made = self.raise_request(
            "ask_human", {"question": question}, key=key, prompt=question, kind=INPUT, **options
        )
        answered = self.wait(made, within).outcome()
        return answered.response or ""


class AsyncGateway:
    """Gateway's asynchronous twin, on httpx.AsyncClient."""

    def __init__(
        self,
        url: str,
        token: str,
        agent: str,
        run_id: str | None = None,
        *,
        retry: Retry | None = None,
        transport: httpx.AsyncBaseTransport | None = None,
        sleep: Callable[[float], Awaitable[None]] = asyncio.sleep,
    ) -> None:
        self.agent = agent
        self.run_id = run_id or new_key()
        self.retry = retry or Retry()
        self.sleep = sleep
        self.http = httpx.AsyncClient(
            base_url=url.rstrip("/"),
            headers={"Authorization": f"Bearer {token}"},
            timeout=httpx.Timeout(10.0, read=POLL_SECONDS + 30),
            transport=transport,
        )

    async def aclose(self) -> None:
        await self.http.aclose()

    async def __aenter__(self) -> "AsyncGateway":
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()

    async def _call(self, method: str, path: str, **kwargs: Any) -> dict[str, Any]:
        for attempt in range(self.retry.attempts):
            last = attempt == self.retry.attempts - 1
            try:
                response = await self.http.request(method, path, **kwargs)
            except httpx.TransportError:
                if last:
                    raise
                await self.sleep(self.retry.delay(attempt, None))
                continue
            if response.status_code in RETRY_STATUSES and not last:
                await self.sleep(self.retry.delay(attempt, response))
                continue
            return _decode(response)
        raise AssertionError("unreachable: the last attempt returns or raises")

    async def jwks(self) -> dict[str, Any]:
        """The gateway's public keys (/.well-known/jwks.json), for Request.verify_receipt."""
        return await self._call("GET", "/.well-known/jwks.json")

    async def raise_request(
        self,
        tool: str,
        arguments: dict[str, Any] | None = None,
        *,
        key: str | None = None,
        schema: dict[str, Any] | None = None,
        prompt: str = "",
        kind: str = CONFIRMATION,
        timeout: int | None = None,
        on_timeout: str = "reject",
        policy: str | None = None,
        description: str | None = None,
        summary: str | None = None,
        reject_reasons: list[str] | None = None,
    ) -> Request:
        body = _body(
            self.agent,
            self.run_id,
            tool,
            arguments or {},
            key=key or new_key(),
            schema=schema,
            prompt=prompt,
            kind=kind,
            timeout=timeout,
            on_timeout=on_timeout,
            policy=policy,
            description=description,
            summary=summary,
            reject_reasons=reject_reasons,
        )
        return Request.of(await self._call("POST", "/api/requests", json=body))

    async def get(self, request_id: str, wait: int = 0) -> Request:
        params = {"wait": str(wait)} if wait else {}
        return Request.of(await self._call("GET", f"/api/requests/{request_id}", params=params))

    async def wait(self, request: Request | str, within: float | None = None) -> Request:
        request_id = request if isinstance(request, str) else request.id
        end = None if within is None else time.monotonic() + within
        while True:
            left = (
                POLL_SECONDS if end is None else max(0, min(POLL_SECONDS, end - time.monotonic()))
            )
            found = await self.get(request_id, wait=max(1, int(left)))
            if not found.pending:
                return found
            if end is not None and time.monotonic() >= end:
                raise StillPending(found)

    async def request_approval(
        self, tool: str, arguments: dict[str, Any], **options: Any
    ) -> Request:
        within = options.pop("within", None)
        made = await self.raise_request(tool, arguments, **options)
        return (await self.wait(made, within)).outcome()

    async def ask(self, question: str, *, key: str | None = None, **options: Any) -> str:
        within = options.pop("within", None)
        made = await self.raise_request(
            "ask_human", {"question": question}, key=key, prompt=question, kind=INPUT, **options
        )
        return (await self.wait(made, within)).outcome().response or ""
