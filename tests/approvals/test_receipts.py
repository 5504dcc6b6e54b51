"""Signed receipts (agents.receipts): every decision, whoever took it, is a compact JWS that a
verifier checks with nothing but GET /.well-known/jwks.json and the receipt.

The verifier here is joserfc, a JOSE library that knows nothing of the gateway: what it
accepts, any standard verifier accepts. The Python client's check is clients/python's.
"""

import json
import re
import warnings
from datetime import timedelta
from pathlib import Path
from typing import Any

import httpx
import pytest
from approval_client import Decision, Gateway, ReceiptInvalid
from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
from django.core.management import CommandError, call_command
from django.db import transaction
from django.test import Client
from django.utils import timezone
from joserfc import jws
from joserfc.errors import JoseError
from joserfc.jwk import KeySet

from access.models import ApiToken
from agents import deadlines, decisions, receipt_keys, receipts
from agents.hashing import canonical_hash
from agents.models import Event, ReceiptKey, Suspension
from tests.approvals import state
from tests.approvals.test_policy import PolicyTestCase, payer
from tests.external.test_requests_api import Caller, ask


def published() -> dict[str, Any]:
    """The JWKS as anyone reads it: no login, no token."""
    r = Client().get("/.well-known/jwks.json")
    assert r.status_code == 200 and r["Content-Type"] == "application/jwk-set+json"
    found: dict[str, Any] = r.json()
    return found


def through_django(request: httpx.Request) -> httpx.Response:
    """The Python client's HTTP calls answered by the gateway in this process."""
    r = Client().generic(
        request.method,
        request.url.raw_path.decode(),
        request.content,
        content_type=request.headers.get("content-type", ""),
        headers={"Authorization": request.headers["authorization"]},
    )
    return httpx.Response(
        r.status_code, content=r.content, headers={"content-type": r["Content-Type"]}
    )


def verified(receipt: str, jwks: dict[str, Any]) -> dict[str, Any]:
    """The receipt's claims, checked by joserfc with the published keys alone."""
    with warnings.catch_warnings():
        # joserfc prefers the newer alg name "Ed25519" (RFC 9864); EdDSA is the issue's.
        warnings.simplefilter("ignore")
        found = jws.deserialize_compact(receipt, KeySet.import_key_set(jwks), algorithms=["EdDSA"])
    claims: dict[str, Any] = json.loads(found.payload)
    return claims


def tampered(receipt: str) -> str:
    """The receipt with its claims changed: approved=false made true, or a byte flipped."""
    header, payload, signature = receipt.split(".")
    claims = json.loads(receipts._unb64(payload))
    claims["decision"]["approved"] = not claims["decision"]["approved"]
    changed = receipts._b64(json.dumps(claims).encode())
    return f"{header}.{changed}.{signature}"


class DeciderTestCase(PolicyTestCase):
    def test_a_person_s_approval_of_edited_arguments(self) -> None:
        _, [s] = state.suspended(self.users["operator"])
        edited = {**state.TRANSFER, "amount": 150}
        r = self.decide("reviewer", s, approved=True, modifiedArgs=edited)
        assert r.status_code == 202, r.content
        receipt = r.json()["outcome"]["receipt"]
        claims = verified(receipt, published())
        assert claims["suspension"] == str(s.pk) and claims["tool"] == "transfer_funds"
        assert claims["decider"] == {
            "kind": "user",
            "id": self.users["reviewer"].pk,
            "name": "alice",
        }
        assert claims["decision"]["status"] == "approved" and claims["decision"]["approved"]
        # What was approved: the edit, not the arguments the agent sent.
        assert claims["edited"] and claims["args_hash"] == canonical_hash(edited)
        assert claims["seq"] == 1 and claims["prev"] is None
        # The same receipt in the suspension's JSON and in the SUSPENSION_DECIDED event.
        read = self.api("reviewer").get(f"/api/suspensions/{s.pk}").json()
        assert read["decision"]["receipt"] == receipt
        event = Event.objects.get(suspension=s, type=Event.Type.SUSPENSION_DECIDED)
        assert event.payload["receipt"] == receipt

    def test_a_rejection_and_its_reason(self) -> None:
        _, [s] = state.suspended(self.users["operator"])
        r = self.decide("teammate", s, approved=False, reason="wrong account")
        claims = verified(r.json()["outcome"]["receipt"], published())
        assert claims["decision"]["status"] == "rejected" and not claims["decision"]["approved"]
        assert claims["decision"]["reason"] == "wrong account"
        assert claims["decider"]["name"] == "bob" and not claims["edited"]
        assert claims["args_hash"] == canonical_hash(state.TRANSFER)

    def test_a_quorum_s_receipt_names_every_approver(self) -> None:
        thread = self.start("policy: {quorum: 2}")
        s = self.pending(thread)
        assert self.decide("reviewer", s, approved=True).status_code == 202
        s.refresh_from_db()
        assert s.pending and s.receipt == ""  # a vote is no decision yet
        assert self.decide("teammate", s, approved=True).status_code == 202
        s.refresh_from_db()
        claims = verified(s.receipt, published())
        assert claims["decider"]["name"] == "bob"
        assert sorted(claims["decider"]["approved_by"]) == ["alice", "bob"]

    def test_the_passkey_a_person_used_is_in_the_receipt(self) -> None:
        _, [s] = state.suspended(self.users["operator"])
        # The proof approvals.stepup puts in the decision once it verified the assertion.
        proof = {"credential": "cred-1", "name": "laptop"}
        decided = decisions.decide(s, self.users["reviewer"], {"approved": True, "step_up": proof})
        claims = verified(decided.suspension.receipt, published())
        assert claims["decider"]["passkey"] == proof

    @pytest.mark.parametrize("key", ["auto_approve", "auto_reject"])
    def test_a_policy_rule_in_a_run(self, key: str) -> None:
        thread = self.start(f'policy: {{{key}: [{{arg: amount, op: "<", value: 500}}]}}')
        s = self.pending(thread)
        claims = verified(s.receipt, published())
        assert claims["decider"] == {
            "kind": "rule",
            "key": key,
            "index": 0,
            "rule": "amount < 500",
        }
        assert claims["decision"]["approved"] is (key == "auto_approve")
        event = Event.objects.get(suspension=s, type=Event.Type.SUSPENSION_DECIDED)
        assert event.payload["receipt"] == s.receipt

    def test_a_policy_rule_on_an_outside_agent_s_request(self) -> None:
        self.load_agents(payer('policy: {auto_reject: [{arg: amount, op: ">", value: 500}]}'))
        agent = Caller(self.users["operator"], "runs")
        big = ask(arguments={"amount": 900, "to": "ACME"}, policy="payer")
        body = agent.post("/api/requests", big).json()
        assert body["status"] == "rejected"
        claims = verified(body["receipt"], published())
        assert claims["decider"]["kind"] == "rule" and claims["decider"]["key"] == "auto_reject"
        assert claims["args_hash"] == canonical_hash({"amount": 900, "to": "ACME"})

    @pytest.mark.parametrize("on_timeout", ["reject", "approve"])
    def test_the_deadline(self, on_timeout: str) -> None:
        _, [s] = state.suspended(self.users["operator"], expires_in=1, on_timeout=on_timeout)
        assert deadlines.expire_overdue(timezone.now() + timedelta(seconds=5)) == 1
        s.refresh_from_db()
        claims = verified(s.receipt, published())
        assert claims["decider"] == {"kind": "deadline"}
        assert claims["decision"]["status"] == "timed_out"
        assert claims["decision"]["approved"] is (on_timeout == "approve")
        event = Event.objects.get(suspension=s, type=Event.Type.SUSPENSION_TIMEOUT)
        assert event.payload["receipt"] == s.receipt

    def test_a_decision_after_the_deadline_is_signed_by_the_clock(self) -> None:
        _, [s] = state.suspended(self.users["operator"], expires_in=1)
        later = timezone.now() + timedelta(seconds=5)
        decided = decisions.decide(s, self.users["reviewer"], {"approved": True}, now=later)
        assert not decided.created
        claims = verified(decided.suspension.receipt, published())
        assert claims["decider"] == {"kind": "deadline"}

    def test_a_grant(self) -> None:
        """A grant's decision (built beside this): the suspension decided by it, then one
        call to receipts.issue with the grant's decider."""
        _, [s] = state.suspended(self.users["operator"])
        now = timezone.now()
        with transaction.atomic():
            s.status, s.approved, s.decided_at = Suspension.Status.APPROVED, True, now
            s.decided_by_name = "grant"
            Suspension.objects.filter(pk=s.pk).update(
                status=s.status, approved=True, decided_at=now, decided_by_name="grant"
            )
            decider = {"kind": "grant", "grant": 7, "granted_by": "alice"}
            receipt = receipts.issue(s, decider)
        s.refresh_from_db()
        assert s.receipt == receipt
        assert verified(receipt, published())["decider"] == decider

    def test_an_unknown_kind_of_decider_is_refused(self) -> None:
        _, [s] = state.suspended(self.users["operator"])
        with pytest.raises(ValueError):
            receipts.issue(s, {"kind": "someone"})


class ReceiptIntegrityTestCase(PolicyTestCase):
    def test_a_changed_receipt_fails(self) -> None:
        _, [s] = state.suspended(self.users["operator"])
        r = self.decide("reviewer", s, approved=False, reason="no")
        receipt = r.json()["outcome"]["receipt"]
        jwks = published()
        with warnings.catch_warnings(), pytest.raises(JoseError):
            warnings.simplefilter("ignore")
            verified(tampered(receipt), jwks)
        with pytest.raises(receipts.ReceiptInvalid, match="signature"):
            receipts.verify(tampered(receipt), jwks)
        # Signed by a key the gateway never published.
        other = {
            "keys": [
                receipt_keys.public_jwk(Ed25519PrivateKey.generate(), published()["keys"][0]["kid"])
            ]
        }
        with pytest.raises(receipts.ReceiptInvalid, match="signature"):
            receipts.verify(receipt, other)

    def test_rotation_keeps_old_receipts_verifiable(self) -> None:
        _, [first, second] = state.suspended(
            self.users["operator"],
            calls=[("transfer_funds", dict(state.TRANSFER)), ("ask_user", {"question": "Why?"})],
        )
        self.decide("reviewer", first, approved=True)
        old_kid = ReceiptKey.objects.get(current=True).kid
        call_command("rotate_receipt_key", stdout=open("/dev/null", "w"))
        self.decide("reviewer", second, response="Rent")
        first.refresh_from_db()
        second.refresh_from_db()
        jwks = published()
        kids = [k["kid"] for k in jwks["keys"]]
        assert len(kids) == 2 and old_kid in kids and all("d" not in k for k in jwks["keys"])
        # Each verifies with the JWKS as published now; the two were signed by different keys.
        assert verified(first.receipt, jwks)["seq"] == 1
        claims = verified(second.receipt, jwks)
        assert claims["seq"] == 2 and claims["prev"] == receipts.receipt_hash(first.receipt)
        assert claims["decision"]["response_hash"] == canonical_hash("Rent")
        headers = [
            json.loads(receipts._unb64(r.split(".")[0])) for r in (first.receipt, second.receipt)
        ]
        assert headers[0]["kid"] == old_kid != headers[1]["kid"]
        rotated = Event.objects.filter(type=Event.Type.RECEIPT_KEY_ROTATED).latest("id")
        assert rotated.payload == {"kid": headers[1]["kid"], "previous": old_kid}


class VerifyReceiptsCommandTestCase(PolicyTestCase):
    @pytest.fixture(autouse=True)
    def decided(self, setup: None, tmp_path: Path) -> None:
        self.thread, self.calls = state.suspended(
            self.users["operator"],
            calls=[("transfer_funds", dict(state.TRANSFER)), ("ask_user", {"question": "Why?"})],
        )
        self.decide("reviewer", self.calls[0], approved=True)
        self.decide("teammate", self.calls[1], response="Rent")
        self.jwks = tmp_path / "jwks.json"
        self.jwks.write_text(json.dumps(published()))
        self.tmp = tmp_path

    def verify(self, *args: str) -> str:
        out = self.tmp / "out.txt"
        with out.open("w") as stdout:
            call_command("verify_receipts", "--jwks", str(self.jwks), *args, stdout=stdout)
        return out.read_text()

    def test_a_thread_s_receipts_and_their_chain(self) -> None:
        assert "OK 2 receipts verified" in self.verify("--thread", str(self.thread.pk))

    def test_a_changed_receipt_or_row_fails(self) -> None:
        s = self.calls[0]
        s.refresh_from_db()
        Suspension.objects.filter(pk=s.pk).update(receipt=tampered(s.receipt))
        with pytest.raises(CommandError, match="problem"):
            self.verify("--thread", str(self.thread.pk))
        # The receipt intact, the row changed afterwards: the row no longer says what was signed.
        Suspension.objects.filter(pk=s.pk).update(receipt=s.receipt, approved=False)
        with pytest.raises(CommandError, match="problem"):
            self.verify("--thread", str(self.thread.pk))

    def test_a_receipt_removed_from_the_chain_fails(self) -> None:
        first = self.calls[0]
        Suspension.objects.filter(pk=first.pk).update(receipt="", receipt_seq=None)
        with pytest.raises(CommandError, match="problem"):
            self.verify("--thread", str(self.thread.pk))

    def test_an_export(self) -> None:
        staff = Client()
        staff.force_login(self.users["admin"])
        for name, url in (
            ("audit.jsonl", "/audit/export.jsonl"),
            ("events.jsonl", "/audit/events.jsonl"),
        ):
            r = staff.get(url)
            assert r.status_code == 200
            path = self.tmp / name
            path.write_bytes(b"".join(r.streaming_content))
            assert "OK 2 receipts verified" in self.verify("--export", str(path))
        rows = [json.loads(line) for line in (self.tmp / "audit.jsonl").read_text().splitlines()]
        # A cut (one tool's requests): what is there verifies; the link to what is not, unchecked.
        cut = self.tmp / "cut.jsonl"
        cut.write_text(json.dumps(rows[1]))
        assert "OK 1 receipts verified" in self.verify("--export", str(cut))
        rows[0]["receipt"] = tampered(rows[0]["receipt"])
        changed = self.tmp / "changed.jsonl"
        changed.write_text("\n".join(json.dumps(row) for row in rows))
        with pytest.raises(CommandError, match="problem"):
            self.verify("--export", str(changed))

    def test_without_the_key_nothing_verifies(self) -> None:
        self.jwks.write_text(json.dumps({"keys": []}))
        with pytest.raises(CommandError, match="2 problem"):
            self.verify("--thread", str(self.thread.pk))


class OutsideCheckTestCase(PolicyTestCase):
    """The README's check and the Python client's, on a receipt read over the API."""

    def decided_request(self) -> dict[str, Any]:
        agent = Caller(self.users["operator"], "runs")
        body = agent.post("/api/requests", ask()).json()
        path = f"/api/threads/{body['thread']}/suspensions/{body['id']}/resume"
        edited = {"amount": 100, "to": "ACME"}
        r = Caller(self.users["reviewer"], "decide").post(
            path, {"approved": True, "modifiedArgs": edited}
        )
        assert r.status_code == 202, r.content
        found: dict[str, Any] = agent.get(f"/api/requests/{body['id']}").json()
        assert found["arguments"] == edited and found["receipt"]
        return found

    def test_the_readme_s_check_runs_as_written(self) -> None:
        readme = (Path(__file__).resolve().parents[2] / "README.md").read_text()
        code = re.search(r"<!-- receipt-check -->\n```python\n(.*?)```", readme, re.S)
        assert code, "README.md has no receipt-check block"
        space: dict[str, Any] = {}
        exec(code.group(1), space)
        body = self.decided_request()
        jwks = published()
        claims = space["check_receipt"](body["receipt"], jwks)
        assert claims["suspension"] == body["id"] and claims["decider"]["name"] == "alice"
        with pytest.raises(InvalidSignature):
            space["check_receipt"](tampered(body["receipt"]), jwks)

    def test_the_client_s_verify_receipt(self) -> None:
        body = self.decided_request()
        decision = Decision.of(body)
        jwks = published()
        claims = decision.verify_receipt(jwks)
        assert claims["args_hash"] == canonical_hash({"amount": 100, "to": "ACME"})
        assert claims["decider"]["kind"] == "user"
        # A receipt changed on the way, or one about other arguments, is refused.
        with pytest.raises(ReceiptInvalid, match="signature"):
            Decision.of({**body, "receipt": tampered(body["receipt"])}).verify_receipt(jwks)
        with pytest.raises(ReceiptInvalid, match="arguments"):
            Decision.of({**body, "arguments": {"amount": 9000, "to": "ACME"}}).verify_receipt(jwks)
        with pytest.raises(ReceiptInvalid, match="no published key"):
            decision.verify_receipt({"keys": []})

    def test_the_client_reads_the_keys_and_checks_what_it_is_about_to_run(self) -> None:
        body = self.decided_request()
        _, raw = ApiToken.issue(self.users["operator"], "agent", ["runs"])
        transport = httpx.MockTransport(through_django)
        with Gateway("http://testserver", raw, agent="billing-bot", transport=transport) as gw:
            decision = gw.get(body["id"])
            assert decision.receipt == body["receipt"]
            claims = decision.verify_receipt(gw.jwks())
        assert claims["suspension"] == body["id"] and claims["decision"]["approved"] is True
