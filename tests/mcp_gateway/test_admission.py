"""mcp_gateway.admission: a caller's admission is reused for a second, and no more than that
for a revoked token; an expired one is refused at once; a refusal is never reused."""

import json
import time
from datetime import timedelta
from typing import Any

import httpx
import pytest
from django.utils import timezone

from access import tokens
from access.models import ApiToken
from agents.models import Event
from mcp_gateway import admission
from tests.conftest import wait_for
from tests.mcp_gateway.conftest import Upstream

CALL = {
    "jsonrpc": "2.0",
    "id": 1,
    "method": "tools/call",
    "params": {"name": "read_note", "arguments": {"name": "todo"}},
}


class AdmissionTestCase:
    @pytest.fixture(autouse=True)
    def setup(self, files: Upstream, gateway_url: str, users: dict[str, Any]) -> None:
        self.url = f"{gateway_url}/mcp/files"
        self.caller = users["operator"]

    def call(self, raw_token: str) -> httpx.Response:
        """A plain call of an immediate tool (the relay answers it: the quickest path)."""
        return httpx.post(
            self.url,
            content=json.dumps(CALL),
            headers={
                "Authorization": f"Bearer {raw_token}",
                "Content-Type": "application/json",
                "Accept": "application/json, text/event-stream",
                "MCP-Protocol-Version": "2025-11-25",
            },
            timeout=30,
        )

    def assert_answered(self, r: httpx.Response) -> None:
        assert r.status_code == 200, r.text
        assert r.json()["result"]["content"][0]["text"] == "note todo: hello"

    def assert_refused(self, r: httpx.Response, why: str) -> None:
        assert r.status_code == 401, r.text
        assert r.json()["error"]["code"] == admission.UNAUTHENTICATED
        assert why in r.json()["error"]["message"]
        assert r.headers["WWW-Authenticate"].startswith("Bearer")

    def events(self) -> int:
        return Event.objects.filter(type=Event.Type.MCP_TOOL_CALLED).count()

    def test_a_revoked_token_is_refused_within_the_admitted_second(self) -> None:
        token, raw = tokens.create(self.caller, "agent", ["runs"])
        self.assert_answered(self.call(raw))
        self.assert_answered(self.call(raw))  # (the admission kept)
        wait_for(lambda: self.events() == 2, what="the calls' events")
        tokens.revoke(token, via="test")
        time.sleep(admission.ADMITTED_SECONDS + 0.2)
        self.assert_refused(self.call(raw), "revoked")
        # And it stays refused; the upstream's tool was not called for it.
        self.assert_refused(self.call(raw), "revoked")
        time.sleep(0.3)
        assert self.events() == 2

    def test_a_refusal_is_not_kept(self) -> None:
        refused = self.call("gw_not-a-token")
        assert refused.status_code == 401
        token, raw = tokens.create(self.caller, "agent", ["runs"])
        self.assert_answered(self.call(raw))
        # A token refused (expired) and then given more time is admitted on its very next
        # request: its refusal was not remembered.
        token, raw = tokens.create(self.caller, "agent-later", ["runs"])
        ApiToken.objects.filter(pk=token.pk).update(
            expires_at=timezone.now() - timedelta(seconds=1)
        )
        self.assert_refused(self.call(raw), "expired")
        ApiToken.objects.filter(pk=token.pk).update(expires_at=timezone.now() + timedelta(hours=1))
        self.assert_answered(self.call(raw))

    def test_an_expired_token_is_refused_at_once_though_its_admission_is_kept(self) -> None:
        lead = 2.0
        expires = timezone.now() + timedelta(seconds=lead)
        _, raw = tokens.create(self.caller, "agent", ["runs"], expires_at=expires)
        deadline = time.monotonic() + lead
        # Admitted 0.6 s before it expires: the admission is kept past the expiry.
        time.sleep(max(0.0, deadline - 0.6 - time.monotonic()))
        admitted_at = time.monotonic()
        self.assert_answered(self.call(raw))
        time.sleep(max(0.0, deadline + 0.1 - time.monotonic()))
        r = self.call(raw)
        # Still inside the second the admission is kept for, so it was reused (a read of the
        # token would refuse it anyway): the expiry is checked on the reuse itself.
        assert time.monotonic() - admitted_at < admission.ADMITTED_SECONDS
        self.assert_refused(r, "expired")
