"""The hash chain over the Event table: each event's hash covers its content and its chain's
previous hash, so a changed, removed or slipped-in row shows.

One chain per thread, and one for the events with no thread (tokens, webhooks, agent
versions). Not one global chain: events are written by many workers at once (a thread's
parallel agent instances among them), and a global chain would make every event write in the
gateway wait for one lock. A thread's chain is serialized by the lock its writers mostly hold
already, the thread's row (`SELECT ... FOR NO KEY UPDATE`, compatible with the key-share locks
of rows inserted under the thread); the threadless chain by an advisory lock of its own. Both
are taken in `seal`, in the transaction that writes the events, once per transaction and
chain: the heads a transaction wrote are remembered on a no-op commit callback, which Django
drops with a savepoint rolled back, so a remembered head is always a row still there.

The hash is SHA-256 of the canonical JSON (agents.hashing.canonical_json) of `content`: the
previous hash, type, thread, suspension, actor id and name, created_at and payload. The id is
not covered: it is given by the database on insert, and no row may be updated afterwards
(on PostgreSQL a trigger refuses it, migration 0007). Order is covered by the links instead:
events of a chain are written under its lock, so their ids rise in chain order; a row
deleted from the middle leaves the next row's prev_hash pointing at a hash that the row before
it does not have. Removing the newest rows of a chain leaves no trace inside the table: keep
the heads (`verify_audit --heads`) or an export elsewhere to catch that.

Rows written before the chain existed have an empty hash: `verify` counts them as unchained,
not broken, as long as they come before a chain's first hashed row. They were not
backfilled, because a hash written now would vouch for content nobody checked when it was
written.
"""

import hashlib
import json
import uuid
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime
from decimal import Decimal
from typing import Any

from django.db import connection, transaction
from django.db.models import Max, Q
from django.utils import timezone

from agents.hashing import canonical_json
from agents.models import Event
from infra import transactions

# The key of the threadless chain's advisory lock (pg_advisory_xact_lock): "EVCHAIN" in ASCII.
THREADLESS_LOCK = 0x45564348_41494E

# The fields a hash covers, under the names of the audit export (approvals.audit).
HASHED = ("prev_hash", "type", "thread", "suspension", "actor_id", "actor", "created_at", "payload")

ChainKey = str | None  # a thread's id as text; None for the threadless chain


def content(
    *,
    prev_hash: str,
    type: str,
    thread: uuid.UUID | None,
    suspension: uuid.UUID | None,
    actor_id: int | None,
    actor: str,
    created_at: datetime,
    payload: Any,
) -> dict[str, Any]:
    """What an event's hash covers, as the audit export writes it."""
    return {
        "prev_hash": prev_hash,
        "type": type,
        "thread": _uuid_text(thread),
        "suspension": _uuid_text(suspension),
        "actor_id": actor_id,
        "actor": actor,
        "created_at": timestamp(created_at),
        "payload": payload,
    }


def digest(value: dict[str, Any]) -> str:
    return hashlib.sha256(canonical_json(value).encode()).hexdigest()


def timestamp(value: datetime) -> str:
    """created_at as hashed and exported: UTC, always with microseconds."""
    return value.astimezone(UTC).isoformat(timespec="microseconds")


def stored_form(payload: Any) -> Any:
    """The payload as it reads back from the database, so the hash taken now is the hash a
    verifier takes later: tuples become lists, keys strings, and the floats PostgreSQL's jsonb
    gives back otherwise (1e+16 comes back as 10000000000000000, -0.0 as 0.0) take that form."""
    return json.loads(json.dumps(payload), parse_float=_float)


def _float(text: str) -> Any:
    if "e+" in text or "E+" in text:
        return int(Decimal(text))  # only integral doubles print with a positive exponent
    value = float(text)
    return 0.0 if value == 0 else value


def _uuid_text(value: uuid.UUID | str | None) -> str | None:
    return (
        None
        if value is None
        else str(value if isinstance(value, uuid.UUID) else uuid.UUID(str(value)))
    )


def key_of(event: Event) -> ChainKey:
    return _uuid_text(event.thread_id)


def event_content(event: Event) -> dict[str, Any]:
    return content(
        prev_hash=event.prev_hash,
        type=event.type,
        thread=event.thread_id,
        suspension=event.suspension_id,
        actor_id=event.actor_id,
        actor=event.actor_name,
        created_at=event.created_at,
        payload=event.payload,
    )


# Writing ---------------------------------------------------------------------------------


class _Heads:
    """A commit callback that does nothing: it carries the chain heads its transaction wrote
    (see the module's docstring)."""

    def __init__(self) -> None:
        self.heads: dict[ChainKey, str] = {}

    def __call__(self) -> None:
        pass


def seal(events: list[Event]) -> None:
    """Give each event its created_at, prev_hash and hash, in list order, inside the caller's
    transaction (which must be open: the chains' locks last until it ends)."""
    keys = list(dict.fromkeys(key_of(e) for e in events))
    heads = _remembered(keys)
    missing = [k for k in keys if k not in heads]
    if missing:
        heads.update(_lock_and_read(connection, missing))
    now = timezone.now()
    for event in events:
        key = key_of(event)
        event.created_at = now
        event.payload = stored_form(event.payload)
        event.prev_hash = heads[key]
        event.hash = digest(event_content(event))
        heads[key] = event.hash
    _remember({k: heads[k] for k in keys})


def begun(thread_id: uuid.UUID) -> None:
    """A thread made in the caller's transaction: its chain is empty, and no other
    transaction can write to it before this one commits (none can see the thread's row), so
    seal need not lock it and read its head."""
    _remember({_uuid_text(thread_id): ""})


def _remembered(keys: list[ChainKey]) -> dict[ChainKey, str]:
    found: dict[ChainKey, str] = {}
    wanted = set(keys)
    for func, _ in transactions.scheduled():
        if isinstance(func, _Heads):
            for key in wanted & func.heads.keys():
                found.setdefault(key, func.heads[key])
            if len(found) == len(wanted):
                break
    return found


def _remember(heads: dict[ChainKey, str]) -> None:
    """Keep the heads in the newest commit callback if it is a _Heads of this savepoint
    level, else in a new one: _remembered reads the newest first, so heads kept in an older
    callback would lose to the stale ones of a callback scheduled after it."""
    newest = next(transactions.scheduled(), None)
    if newest is not None:
        func, at_this_level = newest
        if isinstance(func, _Heads) and at_this_level:
            func.heads.update(heads)
            return
    marker = _Heads()
    marker.heads.update(heads)
    transaction.on_commit(marker)


def _lock_and_read(connection: Any, keys: list[ChainKey]) -> dict[ChainKey, str]:
    """Lock the chains of `keys` (threads in id order, so two writers never wait on each
    other crosswise) and read each one's newest hash ("" for a chain not begun)."""
    threads = sorted(uuid.UUID(k) for k in keys if k is not None)
    threadless = None in keys
    heads: dict[ChainKey, str] = dict.fromkeys(keys, "")
    if connection.vendor == "postgresql":
        # One round trip: the function (migrations 0007 and 0023) takes the locks, then reads
        # each head in a statement of its own, whose snapshot sees what the lock's last holder
        # committed.
        with connection.cursor() as cursor:
            cursor.execute(
                "SELECT chain_thread, chain_head FROM agents_event_chain_heads(%s::uuid[], %s)",
                [threads, threadless],
            )
            for thread, head in cursor.fetchall():
                heads[_uuid_text(thread)] = head or ""
        return heads
    # SQLite: the transaction holds the database's write lock from its start
    # (transaction_mode IMMEDIATE, gateway.settings), so reading the heads is enough.
    where = Q(thread_id__in=threads) if threads else Q(pk__in=[])
    if threadless:
        where |= Q(thread_id__isnull=True)
    newest = (
        Event.objects.filter(where)
        .exclude(hash="")
        .values("thread_id")
        .annotate(last=Max("id"))
        .values("last")
    )
    for thread, head in Event.objects.filter(id__in=newest).values_list("thread_id", "hash"):
        heads[_uuid_text(thread)] = head
    return heads


# Checking --------------------------------------------------------------------------------


@dataclass
class Break:
    event_id: int
    thread: str | None
    type: str
    kind: str  # content changed | link broken | link missing | unchained
    detail: str

    def __str__(self) -> str:
        chain = f"thread {self.thread}" if self.thread else "the threadless chain"
        return f"event #{self.event_id} ({self.type}) in {chain}: {self.kind}: {self.detail}"


@dataclass
class Report:
    events: int = 0
    chains: int = 0
    unchained: int = 0
    breaks: list[Break] = field(default_factory=list)
    heads: dict[ChainKey, tuple[int, str]] = field(default_factory=dict)


COLUMNS = (
    "id",
    "thread_id",
    "suspension_id",
    "type",
    "actor_id",
    "actor_name",
    "created_at",
    "payload",
    "prev_hash",
    "hash",
)


def rows(threads: Iterable[Any] | None = None, chunk: int = 2000) -> Iterator[Event]:
    """Every event (or those of `threads`), chain by chain, each chain in id order."""
    query = Event.objects.only(*COLUMNS)
    if threads is not None:
        query = query.filter(thread_id__in=list(threads))
    return query.order_by("thread_id", "id").iterator(chunk_size=chunk)


def verify(
    threads: Iterable[Any] | None = None, progress: Callable[[int], None] | None = None
) -> Report:
    """Walk every chain and name the first broken link of each."""
    report = Report()
    key: Any = object()  # no chain yet
    last: tuple[int, str] | None = None
    broken = False
    for event in rows(threads):
        report.events += 1
        if progress is not None and report.events % 10_000 == 0:
            progress(report.events)
        this = key_of(event)
        if this != key:
            key, last, broken = this, None, False
            report.chains += 1
        if broken:
            continue
        found = _check(event, last)
        if found is not None:
            report.breaks.append(found)
            broken = True
            continue
        if event.hash:
            last = (event.id, event.hash)
            report.heads[key] = last
        else:
            report.unchained += 1
    return report


def _check(event: Event, last: tuple[int, str] | None) -> Break | None:
    def broke(kind: str, detail: str) -> Break:
        return Break(event.id, key_of(event), event.type, kind, detail)

    if not event.hash:
        if last is None:
            return None  # written before the chain began
        return broke(
            "unchained",
            f"it has no hash, yet comes after #{last[0]}, which is chained: it was written "
            "outside the gateway",
        )
    if digest(event_content(event)) != event.hash:
        return broke(
            "content changed",
            "its hash does not match what it says now (type, thread, suspension, actor, "
            "created_at, payload or prev_hash was changed)",
        )
    if last is None and event.prev_hash:
        return broke(
            "link missing",
            "it is the chain's first row but points to a previous hash: the rows before it "
            "were removed",
        )
    if last is not None and event.prev_hash != last[1]:
        return broke(
            "link broken",
            f"its prev_hash is not the hash of #{last[0]}, the row before it: a row between "
            "them was removed, or one was rewritten with a new hash",
        )
    return None
