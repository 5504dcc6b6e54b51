"""A2A tests: the official a2a-sdk client against a live daphne and a real Celery worker.

The client is async; each step runs in `asyncio.run`, and the tests read the database between
steps (or, inside a step, through `db`, in a thread of its own), never from the event loop.
"""

import asyncio
import contextlib
import os
import uuid
from collections.abc import AsyncIterator, Callable, Iterator
from typing import Any

import httpx
import pytest
from a2a.client import A2ACardResolver, ClientConfig, ClientFactory
from a2a.client.client import Client
from a2a.types import Message, Part, Role, SendMessageRequest, StreamResponse, Task
from google.protobuf import json_format

from tests.e2e.conftest import daphne_server  # noqa: F401  (the live server, a session fixture)

# The push configs these tests store point at a closed port on 127.0.0.1: the worker's
# deliveries (webhooks) fail at once and nothing leaves the machine. Such an address is
# refused unless WEBHOOKS_ALLOW_PRIVATE, which the server and the worker read from the
# environment when they start; tests/webhooks/conftest.py sets it the same way.
os.environ.setdefault("WEBHOOKS_ALLOW_PRIVATE", "true")
HOOK = "http://127.0.0.1:9/a2a"  # the discard port: nothing listens

AGENTS = """
agents:
  - name: helpdesk
    description: Asks the user before restarting a service.
    model: scripted
    tools: [ask_user]
    script:
      - text: Two environments match your request.
        tool_calls:
          - {name: ask_user, input: {question: "Which environment: staging or production?"}}
      - text: Thanks. I restarted the environment you named.
  - name: payer
    description: Pays an invoice once a reviewer approves.
    model: scripted
    tools: [transfer_funds]
    script:
      - text: Invoice 118 is due; I will pay it.
        tool_calls:
          - name: transfer_funds
            input: {from_account: ACC-1, to_account: ACC-2, amount: 200, currency: EUR}
      - text: Paid.
        if_error:
          text: Not paid.
  - name: mailer
    description: Sends two emails at once; each needs its own approval.
    model: scripted
    tools: [send_email]
    script:
      - text: I will send both.
        tool_calls:
          - {name: send_email, input: {to: a@example.com, subject: Hello, body: One.}}
          - {name: send_email, input: {to: b@example.com, subject: Hello, body: Two.}}
      - text: Sent what was approved.
  - name: stepper
    description: Works in steps, then asks for an approval.
    model: scripted
    tools: [pause, displayConfirmation]
    max_iterations: 6
    script:
      - text: Step one.
        tool_calls: [{name: pause, input: {seconds: 1}}]
      - text: Step two.
        tool_calls: [{name: pause, input: {seconds: 1}}]
      - text: Step three; publishing needs an approval.
        tool_calls: [{name: displayConfirmation, input: {action: Publish the notes}}]
      - text: Published.
  - name: clerk
    description: Asks which form, and takes a short text answer only.
    model: scripted
    input_max_chars: 40
    input_types: [text/plain]
    script:
      - text: "Which form: A or B?"
      - tool_calls: [{name: complete, input: {result: Filed.}}]
  - name: desk
    description: Hands the filing to the clerk.
    model: scripted
    sub_agents: [clerk]
    script:
      - tool_calls: [{name: use_agent, input: {name: clerk, message: file it}}]
      - text: All done.
  - name: formclerk
    description: Asks for the form's fields as JSON.
    model: scripted
    input_types: [application/json]
    script:
      - text: Send the fields as JSON.
      - tool_calls: [{name: complete, input: {result: Stored.}}]
  - name: formdesk
    description: Hands the form to the form clerk.
    model: scripted
    sub_agents: [formclerk]
    script:
      - tool_calls: [{name: use_agent, input: {name: formclerk, message: take the form}}]
      - text: Form stored.
"""


def message(
    text: str | None = None,
    data: Any = None,
    task_id: str = "",
    agent: str | None = None,
    metadata: dict[str, Any] | None = None,
) -> Message:
    """A user's message: a text part and/or a data part."""
    m = Message(message_id=uuid.uuid4().hex, role=Role.ROLE_USER, task_id=task_id)
    if text is not None:
        m.parts.append(Part(text=text))
    if data is not None:
        part = Part()
        json_format.ParseDict(data, part.data)
        m.parts.append(part)
    if agent:
        m.metadata.update({"agent": agent})
    if metadata:
        m.metadata.update(metadata)
    return m


def run(coroutine: Any) -> Any:
    return asyncio.run(coroutine)


async def db(work: Callable[[], Any]) -> Any:
    """Database work from inside a step: in a thread of its own, its connection closed after."""
    from django import db as django_db

    def call() -> Any:
        try:
            return work()
        finally:
            django_db.connection.close()

    return await asyncio.to_thread(call)


async def sent(client: Client, msg: Message, **configuration: Any) -> Task:
    """SendMessage (a client made with streaming=False): the task it answers with."""
    request = SendMessageRequest(message=msg)
    for key, value in configuration.items():
        setattr(request.configuration, key, value)
    async for response in client.send_message(request):
        return response.task
    raise AssertionError("no answer")


def data_of(part: Part) -> Any:
    return json_format.MessageToDict(part.data)


class Gateway:
    """The live server, as one caller or another sees it."""

    def __init__(self, server: Any, users: dict[str, Any]) -> None:
        self.url = server.url
        self.users = users
        # Issued up front: the steps run in an event loop, where the ORM may not be called.
        self.tokens = {who: self.token_for(user) for who, user in users.items()}

    def token_for(self, user: Any) -> str:
        from access.models import ApiToken

        return ApiToken.issue(user, "a2a tests")[1]

    def token(self, who: str) -> str:
        return self.tokens[who]

    def headers(self, who: str | None, version: str | None) -> dict[str, str]:
        headers = {"Authorization": f"Bearer {self.token(who)}"} if who else {}
        if version:
            headers["A2A-Version"] = version
        return headers

    @contextlib.asynccontextmanager
    async def client(
        self, who: str = "reviewer", streaming: bool = False, version: str = "1.0"
    ) -> AsyncIterator[Client]:
        """The SDK's client made from the card: its JSON-RPC transport for 1.0, its 0.3
        compatibility transport when the card offers it only the 0.3 interface."""
        headers = {"Authorization": f"Bearer {self.token(who)}"}
        async with httpx.AsyncClient(headers=headers, timeout=60) as http:
            card = await A2ACardResolver(http, self.url).get_agent_card()
            if version != "1.0":
                kept = [i for i in card.supported_interfaces if i.protocol_version == version]
                del card.supported_interfaces[:]
                card.supported_interfaces.extend(kept)
            config = ClientConfig(httpx_client=http, streaming=streaming)
            client = ClientFactory(config).create(card)
            try:
                yield client
            finally:
                await client.close()

    def rpc(
        self,
        method: str,
        params: Any = None,
        who: str | None = "reviewer",
        version: str | None = "1.0",
        body: str | bytes | None = None,
        request_id: Any = 1,
    ) -> httpx.Response:
        """A raw JSON-RPC call, for what the SDK's client would never send."""
        payload: dict[str, Any] = {"jsonrpc": "2.0", "id": request_id, "method": method}
        if params is not None:
            payload["params"] = params
        with httpx.Client(timeout=60) as http:
            if body is not None:
                return http.post(
                    f"{self.url}/a2a", content=body, headers=self.headers(who, version)
                )
            return http.post(f"{self.url}/a2a", json=payload, headers=self.headers(who, version))

    def rest(self, who: str) -> httpx.Client:
        return httpx.Client(
            base_url=self.url, headers={"Authorization": f"Bearer {self.token(who)}"}, timeout=60
        )


def stream_of(responses: list[StreamResponse]) -> list[tuple[str, str]]:
    """(eventId, what) of each streamed update, the task snapshot as ("task", state)."""
    found = []
    for r in responses:
        kind = r.WhichOneof("payload")
        if kind == "task":
            found.append(("task", r.task.metadata["eventId"]))
        elif kind == "status_update":
            found.append((r.status_update.metadata["eventId"], kind))
        else:
            found.append((r.artifact_update.metadata["eventId"], kind))
    return found


@pytest.fixture
def gateway(
    daphne_server: Any,  # noqa: F811 - the imported session fixture, requested by name
    worker: Any,
    users: dict[str, Any],
    load_agents: Any,
) -> Iterator[Gateway]:
    load_agents(AGENTS)
    if daphne_server.proc is None or daphne_server.proc.poll() is not None:
        daphne_server.start()
    yield Gateway(daphne_server, users)
