"""Signed receipts: every decision, by a person, a rule, a grant, a reviewing model or the
clock, signed once.

A receipt is a compact JWS (RFC 7515) signed with EdDSA over Ed25519 (RFC 8037) by the
current key of agents.receipt_keys; its header names the key (`kid`), whose public half is
at /.well-known/jwks.json. Its claims (canonical JSON, agents.hashing) say what was decided:

    {"v": 1, "suspension", "thread", "seq", "prev", "tool", "agent", "agent_version",
     "args_hash", "edited", "decision": {"status", "approved", "reason", "response_hash"},
     "decider", "decided_at"}

`args_hash` is the SHA-256 of the canonical JSON of the arguments the decision was about:
the reviewer's edit when there was one (`edited`), else the call's arguments. `decider` is
one of {"kind": "user", "id", "name"} (with "approved_by" under a quorum), {"kind": "rule",
"key", "index", "rule"}, {"kind": "grant", "grant", "granted_by"}, {"kind": "model", "name",
"digest"} (a reviewing model, agents.reviewing: `digest` is the SHA-256 of its prompt and
setting) or {"kind": "deadline"}; a person's may carry "passkey": {"credential"}. `seq` and
`prev` chain a thread's receipts: `prev` is the SHA-256 (hex) of the previous receipt's text
(None for the first), so a receipt removed from or slipped into a thread shows.

The chain is serialized by the thread's row lock, which every caller of `issue` holds: decide
takes it (statements.lock_thread), the sweeper takes its threads' locks (deadlines), a run
takes it when it suspends (checkpoints._end and _renew), POST /api/requests locks its thread
or makes it. The unique (thread, receipt_seq) is the net under that rule: a caller without
the lock fails rather than forking the chain.

`verify` and `check_chain` need only the public keys: they are what manage.py
verify_receipts and an outside verifier do (the Python client has its own copy).
"""

import base64
import hashlib
import json
from collections.abc import Iterable
from typing import Any

from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PublicKey

from agents import receipt_keys
from agents.hashing import canonical_hash, canonical_json
from agents.models import Suspension
from agents.request_statements import last_receipt

DECIDER_KINDS = ("user", "rule", "grant", "model", "deadline")


class ReceiptInvalid(Exception):
    """A receipt that does not verify: its words say why."""


def _b64(raw: bytes) -> str:
    return base64.urlsafe_b64encode(raw).rstrip(b"=").decode()


def _unb64(text: str) -> bytes:
    return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))


def receipt_hash(token: str) -> str:
    """What the next receipt's `prev` holds: SHA-256 (hex) of the receipt's text."""
    return hashlib.sha256(token.encode()).hexdigest()


def claims_of(s: Suspension, decider: dict[str, Any], seq: int, prev: str | None) -> dict[str, Any]:
    """What a receipt says of the decided suspension `s` (its fields as the decision set them)."""
    edited = s.modified_args is not None and s.approved is not False
    return {
        "v": 1,
        "suspension": str(s.pk),
        "thread": str(s.thread_id),
        "seq": seq,
        "prev": prev,
        "tool": s.tool_name,
        "agent": s.agent_name,
        "agent_version": s.agent_version,
        "args_hash": canonical_hash(s.modified_args if edited else s.tool_input),
        "edited": edited,
        "decision": {
            "status": s.status,
            "approved": s.approved,
            "reason": s.reason or "",
            "response_hash": canonical_hash(s.response) if s.response is not None else None,
        },
        "decider": decider,
        "decided_at": s.decided_at.isoformat() if s.decided_at else None,
    }


def sign(claims: dict[str, Any]) -> str:
    """The compact JWS of `claims` under the current key: one Ed25519 signature."""
    key = receipt_keys.current()
    header = _b64(canonical_json({"alg": "EdDSA", "kid": key.kid, "typ": "receipt"}).encode())
    payload = _b64(canonical_json(claims).encode())
    signature = key.private.sign(f"{header}.{payload}".encode())
    return f"{header}.{payload}.{_b64(signature)}"


def issue(suspension: Suspension, decider: dict[str, Any]) -> str:
    """Sign the receipt of `suspension`'s decision, just taken in the caller's transaction
    (its fields set as decided, the thread's row locked), and keep it on the suspension:
    written at once when the row exists, else by the caller's insert. Returns the receipt.

    `decider` is one of the shapes in this module's docstring; every decision calls this
    (or `signed`, whose caller writes the columns) once: one signature per decision."""
    token, seq = signed(suspension, decider)
    if not suspension._state.adding:
        Suspension.objects.filter(pk=suspension.pk).update(receipt=token, receipt_seq=seq)
    return token


def signed(suspension: Suspension, decider: dict[str, Any]) -> tuple[str, int]:
    """The receipt and its place in the thread's chain, set on `suspension` but not written:
    agents.decisions.decide writes them with the decision's own update."""
    if decider.get("kind") not in DECIDER_KINDS:
        raise ValueError(f"a decider's kind is one of {DECIDER_KINDS}: {decider!r}")
    last = last_receipt(suspension.thread_id)
    seq, prev = (last[0] + 1, receipt_hash(last[1])) if last else (1, None)
    token = sign(claims_of(suspension, decider, seq, prev))
    suspension.receipt, suspension.receipt_seq = token, seq
    return token, seq


def person(user: Any, **extra: Any) -> dict[str, Any]:
    """The decider of a person's decision: their id and name (and what `extra` adds: the
    quorum's approvers, the passkey used)."""
    found = {"kind": "user", "id": getattr(user, "pk", None), "name": getattr(user, "username", "")}
    return found | {k: v for k, v in extra.items() if v is not None}


def decider_of(token: str | None) -> dict[str, Any]:
    """The decider a suspension's own receipt names, read without checking its signature: for
    the pages, which show the row's receipt (`verify` is what proves one); {} without one."""
    try:
        claims = json.loads(_unb64(token.split(".")[1])) if token else {}
    except (ValueError, IndexError):
        return {}
    decider = claims.get("decider") if isinstance(claims, dict) else None
    return decider if isinstance(decider, dict) else {}


def verify(token: str, jwks: dict[str, Any]) -> dict[str, Any]:
    """The claims of `token` when its signature holds under a key of `jwks` (the JSON of
    /.well-known/jwks.json); else ReceiptInvalid."""
    try:
        header_b64, payload_b64, signature_b64 = token.split(".")
        header = json.loads(_unb64(header_b64))
        signature = _unb64(signature_b64)
    except (ValueError, AttributeError) as e:
        raise ReceiptInvalid("not a compact JWS") from e
    if header.get("alg") != "EdDSA":
        raise ReceiptInvalid(f"unexpected alg {header.get('alg')!r}")
    keys = [
        k
        for k in jwks.get("keys", [])
        if k.get("kid") == header.get("kid") and k.get("kty") == "OKP" and k.get("crv") == "Ed25519"
    ]
    if not keys:
        raise ReceiptInvalid(f"no published key {header.get('kid')!r}")
    try:
        Ed25519PublicKey.from_public_bytes(_unb64(keys[0]["x"])).verify(
            signature, f"{header_b64}.{payload_b64}".encode()
        )
    except (InvalidSignature, ValueError) as e:
        raise ReceiptInvalid("the signature does not match") from e
    claims: dict[str, Any] = json.loads(_unb64(payload_b64))
    return claims


def check_chain(tokens: Iterable[str], jwks: dict[str, Any], whole: bool = True) -> list[str]:
    """Problems with a set of receipts (any order, any threads): each must verify, and each
    thread's must run 1, 2, ... with each `prev` the hash of the one before. [] when sound.

    `whole=False` for an export, which may be a cut (between dates, or one tool's requests):
    a receipt missing from it is no problem, and each link is checked where both of its
    receipts are there."""
    problems: list[str] = []
    threads: dict[str, dict[int, tuple[str, dict[str, Any]]]] = {}
    for token in tokens:
        try:
            claims = verify(token, jwks)
        except ReceiptInvalid as e:
            problems.append(f"receipt {token[:24]}...: {e}")
            continue
        seen = threads.setdefault(claims["thread"], {})
        if claims["seq"] in seen and seen[claims["seq"]][0] != token:
            problems.append(f"thread {claims['thread']}: two receipts at place {claims['seq']}")
        seen[claims["seq"]] = (token, claims)
    for thread, chain in sorted(threads.items()):
        for n in range(1, max(chain) + 1):
            if n not in chain:
                if whole:
                    problems.append(f"thread {thread}: receipt {n} is missing")
                continue
            token, claims = chain[n]
            if n == 1 and claims["prev"] is not None:
                problems.append(f"thread {thread}: receipt 1 links to an earlier one")
            if n - 1 in chain and claims["prev"] != receipt_hash(chain[n - 1][0]):
                problems.append(f"thread {thread}: receipt {n} does not follow receipt {n - 1}")
    return problems
