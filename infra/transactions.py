"""What Django knows of the caller's transaction and does not document: whether one is open,
and the callbacks `transaction.on_commit` scheduled in it.

A write that happens many times in one transaction (an event recorded, a chain's head moved)
adds what it knows to one commit callback instead of scheduling one each; it finds that
callback again here. Django keeps the callbacks in the connection's `run_on_commit`, as
(savepoint ids, callback, robust) tuples, and the open savepoints in `savepoint_ids`; whether
an atomic block is open is its `in_atomic_block`. tests/test_tripwires.py fails when an
upgrade changes any of them.
"""

from collections.abc import Callable, Iterator
from typing import Any

from django.db import DEFAULT_DB_ALIAS, connections


def in_transaction(using: str = DEFAULT_DB_ALIAS) -> bool:
    """Whether the caller runs inside `transaction.atomic` (a savepoint counts)."""
    return bool(connections[using].in_atomic_block)


def scheduled(using: str = DEFAULT_DB_ALIAS) -> Iterator[tuple[Callable[[], Any], bool]]:
    """The callbacks `transaction.on_commit` scheduled in the current transaction, newest
    first, each with whether it was scheduled at the current savepoint level (a rollback of
    that level drops it, and nothing of another level)."""
    connection = connections[using]
    level = set(connection.savepoint_ids)
    for sids, func, _ in reversed(connection.run_on_commit):
        yield func, sids == level
