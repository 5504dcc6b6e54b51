"""mcp_gateway.relay: a plain call of an immediate tool is answered by the gateway itself, and
its answer is the one the official SDK gives the same request; anything else is the SDK's."""

import asyncio
import json
import time
from typing import Any

import httpx
import pytest
from mcp_types import (
    CLIENT_CAPABILITIES_META_KEY,
    CLIENT_INFO_META_KEY,
    PROTOCOL_VERSION_META_KEY,
    SERVER_INFO_META_KEY,
)

from agents.models import Event, Suspension
from mcp_gateway import admission, proxy, relay
from tests.conftest import wait_for
from tests.external.conftest import Later
from tests.mcp_gateway.test_proxy import Through

MODERN = "2026-07-28"
LEGACY = "2025-11-25"
ACCEPT = "application/json, text/event-stream"
# (revision's name, the MCP-Protocol-Version header sent, or None for none)
REVISIONS = [("legacy", LEGACY), ("legacy-unversioned", None), ("modern", MODERN)]


def request(
    version: str | None,
    tool: str,
    arguments: Any,
    rid: Any = 1,
    meta: dict[str, Any] | None = None,
) -> tuple[dict[str, str], dict[str, Any]]:
    """The headers and body of a tools/call as the official client sends it on `version`:
    on 2026-07-28, the per-request envelope in _meta and the routing headers
    (mcp.shared.inbound.classify_inbound_request checks both)."""
    headers = {"Content-Type": "application/json", "Accept": ACCEPT}
    params: dict[str, Any] = {"name": tool, "arguments": arguments}
    envelope: dict[str, Any] = dict(meta or {})
    if version is not None:
        headers["MCP-Protocol-Version"] = version
    if version == MODERN:
        headers["Mcp-Method"] = "tools/call"
        headers["Mcp-Name"] = tool
        envelope |= {
            PROTOCOL_VERSION_META_KEY: MODERN,
            CLIENT_CAPABILITIES_META_KEY: {},
            CLIENT_INFO_META_KEY: {"name": "relay-tests", "version": "1.0"},
        }
    if envelope:
        params["_meta"] = envelope
    return headers, {"jsonrpc": "2.0", "id": rid, "method": "tools/call", "params": params}


def answer(r: httpx.Response, rid: Any) -> dict[str, Any]:
    """The JSON-RPC response to request `rid` in an answer, JSON or SSE."""
    kind = r.headers.get("content-type", "")
    if kind.startswith("application/json"):
        return r.json()
    assert kind.startswith("text/event-stream"), (r.status_code, kind, r.text)
    messages = [
        json.loads(line[len("data:") :])
        for line in r.text.splitlines()
        if line.startswith("data:") and line[len("data:") :].strip()
    ]
    [response] = [m for m in messages if m.get("id") == rid and "method" not in m]
    return response


class RelayTestCase(Through):
    # What the endpoint names the upstream's tools: their own names on /mcp/files.
    PREFIX = ""

    @property
    def header(self) -> str:
        return f"Bearer {self.token}"

    def post(self, headers: dict[str, str], body: Any, timeout: float = 30) -> httpx.Response:
        headers = {**headers, "Authorization": self.header}
        content = body if isinstance(body, str | bytes) else json.dumps(body)
        return httpx.post(self.url, content=content, headers=headers, timeout=timeout)

    def called(self) -> list[Event]:
        return list(Event.objects.filter(type=Event.Type.MCP_TOOL_CALLED))

    def assert_nothing_called(self) -> None:
        # An immediate call's event is written just after its answer (mcp_gateway.audit):
        # give a stray one the time to appear.
        time.sleep(0.3)
        assert self.called() == []
        assert not Suspension.objects.exists()
        assert self.upstream.deleted() == []

    @pytest.mark.parametrize(("revision", "version"), REVISIONS)
    def test_the_relayed_answer_is_the_sdks_answer(self, revision: str, version: str) -> None:
        headers, plain = request(version, self.PREFIX + "read_note", {"name": "todo"}, rid="call-7")
        relayed = self.post(headers, plain)
        assert relayed.status_code == 200, relayed.text
        assert relayed.headers["content-type"] == "application/json"
        # The same call asking for progress: the relay leaves it to the SDK (over SSE on
        # the 2025 revisions).
        _, streamed = request(
            version,
            self.PREFIX + "read_note",
            {"name": "todo"},
            rid="call-7",
            meta={"progressToken": "p1"},
        )
        assert (
            relay.plain_call(
                raw(headers),
                json.dumps(streamed).encode(),
            )
            is None
        )
        by_sdk = self.post(headers, streamed)
        assert by_sdk.status_code == 200, by_sdk.text
        if revision != "modern":
            # (on 2026-07-28 the SDK may answer it as JSON: `answer` reads either)
            assert by_sdk.headers["content-type"].startswith("text/event-stream")
        mine, theirs = answer(relayed, "call-7"), answer(by_sdk, "call-7")
        assert mine == theirs
        assert mine["id"] == "call-7" and mine["result"]["content"][0]["text"] == (
            "note todo: hello"
        )
        assert mine["result"].get("isError", False) is False
        if revision == "modern":
            assert mine["result"]["resultType"] == "complete"
            assert mine["result"]["_meta"][SERVER_INFO_META_KEY]["name"] == "approval-gateway"
        else:
            assert "resultType" not in mine["result"]
        # Both calls were made, and each audited once.
        events = wait_for(lambda: len(self.called()) == 2 and self.called(), what="2 events")
        assert [e.payload["tool"] for e in events] == ["read_note", "read_note"]

    @pytest.mark.parametrize(("revision", "version"), REVISIONS)
    def test_an_unknown_tool_is_the_sdks_error(self, revision: str, version: str) -> None:
        r = self.post(*request(version, self.PREFIX + "format_disk", {}))
        error = answer(r, 1)["error"]
        assert error["code"] == -32602
        assert f"Unknown tool: {self.PREFIX}format_disk" in error["message"]
        self.assert_nothing_called()

    @pytest.mark.parametrize(("revision", "version"), REVISIONS)
    def test_arguments_the_schema_refuses_are_the_sdks_error(
        self, revision: str, version: str
    ) -> None:
        r = self.post(*request(version, self.PREFIX + "read_note", {"name": 5}))
        error = answer(r, 1)["error"]
        assert error["code"] == -32602
        assert f"Invalid arguments for {self.PREFIX}read_note: name" in error["message"]
        # Arguments that are not an object at all are the SDK's too.
        r = self.post(*request(version, self.PREFIX + "read_note", ["todo"]))
        assert "error" in answer(r, 1)
        self.assert_nothing_called()

    def test_a_gated_tool_still_raises_a_request(self) -> None:
        headers, body = request(LEGACY, self.PREFIX + "delete_file", {"path": "/srv/x"})
        held = Later(lambda: self.post(headers, body, timeout=60))
        s = self.reviewer.decide("files", {"approved": False, "reason": "keep it"})
        r = held.result()
        result = answer(r, 1)["result"]
        assert result["isError"] is True and "keep it" in result["content"][0]["text"]
        [request_] = Suspension.objects.all()
        assert str(request_.pk) == str(s["id"]) and request_.tool_name == "delete_file"
        assert request_.tool_input == {"path": "/srv/x"}
        assert self.upstream.deleted() == []

    def test_a_batch_is_the_sdks(self) -> None:
        headers, body = request(LEGACY, self.PREFIX + "read_note", {"name": "todo"})
        r = self.post(headers, [body])
        # The SDK refuses a batch (a JSON-RPC error, 400); the relay answers no array.
        assert r.status_code == 400, r.text
        assert r.json()["id"] is None and "error" in r.json()
        self.assert_nothing_called()

    @pytest.mark.parametrize("kind", ["Application/JSON", "application/json-seq"])
    def test_a_content_type_the_sdk_refuses_is_refused(self, kind: str) -> None:
        headers, body = request(LEGACY, self.PREFIX + "read_note", {"name": "todo"})
        r = self.post({**headers, "Content-Type": kind}, body)
        assert r.status_code == 415, r.text
        assert r.json()["error"]["code"] == -32600
        self.assert_nothing_called()


class CombinedRelayTestCase(RelayTestCase):
    """The same on /mcp, where the tools are named `<server>__<tool>`."""

    ENDPOINT = "/mcp"
    PREFIX = "files__"

    def test_a_tool_of_a_server_the_caller_may_call_is_relayed(self) -> None:
        # (The answers are the same either way: this is where /mcp chooses the relay.)
        caller = proxy.Caller(None, self.caller, admission.credential(self.caller, self.header))
        resolve = proxy.resolver(caller, self.header)
        upstream, tool = asyncio.run(resolve("files__read_note")) or (None, "")
        assert upstream is not None and upstream.name == "files" and tool == "read_note"
        for name in ("nope__read_note", "gateway__ask_human", "__read_note", "files__", "x"):
            assert asyncio.run(resolve(name)) is None, name

    def test_a_server_not_behind_the_gateway_is_the_sdks_unknown_tool(self) -> None:
        for name in ("nope__read_note", "gateway__ask_human", "__read_note", "read_note"):
            error = answer(self.post(*request(LEGACY, name, {"name": "todo"})), 1)["error"]
            assert error["code"] == -32602 and f"Unknown tool: {name}" in error["message"]
        self.assert_nothing_called()


def raw(headers: dict[str, str]) -> list[tuple[bytes, bytes]]:
    return [(k.lower().encode("latin-1"), v.encode("latin-1")) for k, v in headers.items()]


class PlainCallTestCase:
    """relay.plain_call: which requests the relay may answer itself."""

    def plain(
        self,
        version: str | None = LEGACY,
        body: Any = None,
        headers: dict[str, str] | None = None,
        **params: Any,
    ) -> relay.Call | None:
        sent_headers, sent = request(version, "read_note", {"name": "todo"}, rid=3)
        sent["params"] |= params
        if body is not None:
            sent = body
        return relay.plain_call(raw({**sent_headers, **(headers or {})}), json.dumps(sent).encode())

    def test_a_plain_legacy_call(self) -> None:
        assert self.plain() == relay.Call(3, "read_note", {"name": "todo"}, LEGACY)

    def test_a_call_without_a_version_header_is_of_the_sdks_default_revision(self) -> None:
        call = self.plain(version=None)
        assert call is not None and call.version == "2025-03-26"

    def test_a_notification_is_not(self) -> None:
        _, body = request(LEGACY, "read_note", {"name": "todo"})
        del body["id"]
        assert self.plain(body=body) is None

    def test_an_id_neither_string_nor_integer_is_not(self) -> None:
        for rid in (True, None, 1.5, [1]):
            _, body = request(LEGACY, "read_note", {"name": "todo"}, rid=rid)
            assert self.plain(body=body) is None, rid

    def test_a_task_augmented_call_is_not(self) -> None:
        assert self.plain(task={"ttl": 60000}) is None

    def test_a_call_asking_for_progress_is_not(self) -> None:
        assert self.plain(_meta={"progressToken": "p1"}) is None

    def test_a_call_with_param_headers_is_not(self) -> None:
        assert self.plain(headers={"Mcp-Param-X": "1"}) is None

    def test_a_body_not_declared_json_is_not(self) -> None:
        assert self.plain(headers={"Content-Type": "text/plain"}) is None

    def test_a_content_type_only_like_json_is_not(self) -> None:
        assert self.plain(headers={"Content-Type": "Application/JSON"}) is None
        assert self.plain(headers={"Content-Type": "application/json-seq"}) is None

    def test_a_client_that_does_not_accept_json_is_not(self) -> None:
        assert self.plain(headers={"Accept": "text/event-stream"}) is None
        assert self.plain(headers={"Accept": "application/json"}) is not None
        assert self.plain(headers={"Accept": "*/*"}) is not None

    def test_another_method_is_not(self) -> None:
        body = {"jsonrpc": "2.0", "id": 3, "method": "tools/list", "params": {}}
        assert self.plain(body=body) is None
        # Even one whose params mention tools/call.
        body["params"] = {"cursor": "tools/call"}
        assert self.plain(body=body) is None

    def test_a_modern_call_with_its_envelope_and_headers(self) -> None:
        assert self.plain(version=MODERN) == relay.Call(3, "read_note", {"name": "todo"}, MODERN)

    def test_a_modern_call_whose_headers_disagree_with_its_envelope_is_not(self) -> None:
        _, body = request(MODERN, "read_note", {"name": "todo"}, rid=3)
        body["params"]["_meta"][PROTOCOL_VERSION_META_KEY] = "2026-01-01"
        assert self.plain(version=MODERN, body=body) is None
        assert self.plain(version=MODERN, headers={"Mcp-Name": "delete_file"}) is None
        assert self.plain(version=MODERN, headers={"Mcp-Method": "tools/list"}) is None

    def test_a_modern_call_without_its_envelope_is_not(self) -> None:
        _, body = request(MODERN, "read_note", {"name": "todo"}, rid=3)
        del body["params"]["_meta"]
        assert self.plain(version=MODERN, body=body) is None

    def test_an_unsupported_version_is_not(self) -> None:
        assert self.plain(headers={"MCP-Protocol-Version": "2099-01-01"}) is None
