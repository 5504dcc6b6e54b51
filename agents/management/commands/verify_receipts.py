"""Check decisions' receipts (agents.receipts) with the public keys alone."""

import json
import uuid
from pathlib import Path
from typing import Any

import httpx
from django.core.management.base import BaseCommand, CommandError, CommandParser

from agents import receipts
from agents.hashing import canonical_hash
from agents.models import Suspension


def load_jwks(where: str) -> dict[str, Any]:
    """A JWKS from a file or an http(s) URL (the gateway's /.well-known/jwks.json)."""
    try:
        if where.startswith(("http://", "https://")):
            response = httpx.get(where, timeout=10, follow_redirects=True)
            response.raise_for_status()
            found = response.json()
        else:
            found = json.loads(Path(where).read_text())
    except (OSError, ValueError, httpx.HTTPError) as e:
        raise CommandError(f"cannot read the JWKS at {where}: {e}") from e
    if not isinstance(found, dict) or not isinstance(found.get("keys"), list):
        raise CommandError(f"{where} is not a JWKS (an object with a list of keys)")
    return found


def exported(path: str) -> list[str]:
    """The receipts in an export: the suspensions' JSON Lines (a `receipt` per row), the
    events' JSON Lines (a SUSPENSION_DECIDED or SUSPENSION_TIMEOUT payload's `receipt`), or
    one receipt per line."""
    found: list[str] = []
    try:
        lines = Path(path).read_text().splitlines()
    except OSError as e:
        raise CommandError(f"cannot read {path}: {e}") from e
    for line in filter(None, (line.strip() for line in lines)):
        try:
            row = json.loads(line)
        except ValueError:
            found.append(line)
            continue
        if isinstance(row, dict):
            payload = row["payload"] if isinstance(row.get("payload"), dict) else {}
            token = row.get("receipt") or payload.get("receipt")
            if token:
                found.append(token)
    return found


def row_problems(s: Suspension, jwks: dict[str, Any]) -> list[str]:
    """Does the thread's row still say what its receipt signed?"""
    try:
        claims = receipts.verify(s.receipt, jwks)
    except receipts.ReceiptInvalid:
        return []  # named by check_chain
    edited = s.modified_args is not None and s.approved is not False
    now = {
        "suspension": str(s.pk),
        "status": s.status,
        "approved": s.approved,
        "args_hash": canonical_hash(s.modified_args if edited else s.tool_input),
    }
    signed = {
        "suspension": claims["suspension"],
        "status": claims["decision"]["status"],
        "approved": claims["decision"]["approved"],
        "args_hash": claims["args_hash"],
    }
    return [
        f"suspension {s.pk}: its {k} is {now[k]!r}, its receipt says {signed[k]!r}"
        for k in now
        if now[k] != signed[k]
    ]


class Command(BaseCommand):
    help = (
        "Verify the signed receipts of threads (from the database) or of an audit export "
        "(a file) with the public keys only (a JWKS file or URL): each signature, and each "
        "thread's chain of receipts. Exits with status 1 when any fails."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument(
            "--jwks",
            required=True,
            metavar="FILE_OR_URL",
            help="The public keys: a saved /.well-known/jwks.json, or its URL.",
        )
        parser.add_argument(
            "--thread", action="append", metavar="ID", help="A thread's receipts (repeatable)."
        )
        parser.add_argument(
            "--export",
            metavar="FILE",
            help="An audit export (/audit/export.jsonl or /audit/events.jsonl), or one receipt "
            "a line.",
        )

    def handle(self, *args: Any, **options: Any) -> None:
        if bool(options["thread"]) == bool(options["export"]):
            raise CommandError("name threads (--thread) or an export (--export), not both")
        jwks = load_jwks(options["jwks"])
        problems: list[str] = []
        if options["export"]:
            tokens = exported(options["export"])
            # An export may be a cut (dates, filters): its links are checked where both ends are.
            problems = receipts.check_chain(tokens, jwks, whole=False)
        else:
            try:
                threads = [uuid.UUID(t) for t in options["thread"]]
            except ValueError as e:
                raise CommandError(f"--thread takes a thread's id: {e}") from e
            rows = list(
                Suspension.objects.filter(thread_id__in=threads)
                .exclude(receipt="")
                .order_by("receipt_seq")
            )
            tokens = [s.receipt for s in rows]
            problems = receipts.check_chain(tokens, jwks)
            for s in rows:
                problems += row_problems(s, jwks)
        for problem in problems:
            self.stdout.write(f"BROKEN {problem}")
        if problems:
            raise CommandError(f"{len(problems)} problem(s) in {len(tokens)} receipts")
        self.stdout.write(f"OK {len(tokens)} receipts verified")
