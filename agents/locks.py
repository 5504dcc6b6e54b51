"""The rows' locks, each taken one way everywhere: `SELECT ... FOR NO KEY UPDATE`.

The thread's row is the lock of a run; an agent definition's row serializes what is counted
per agent (a new version, rules over history, the reviewing model's budget), and a user's row
what is counted per requester.

Every change to a run (a decision, an ignore, a cancel, a reply, a deadline, a reminder, a
lease renewed for a lane, an external request) takes its thread's row lock first, then the
rows under it. One mode for all of them: FOR NO KEY UPDATE, as the events' hash chain takes it
(agents.chain); it excludes every other taker of this lock and leaves alone the key-share locks
that inserting a row under the thread (an event, a suspension, a frame) takes, so a writer that
inserted such a row before it locked the thread cannot deadlock with another that locked
first. Several threads are locked in one order (their ids), so two sweepers cannot cross.

On SQLite (the embedded default) a write transaction is serialized by the database itself;
these read the rows and lock nothing more.
"""

from collections.abc import Iterable
from typing import Any
from uuid import UUID

from django.contrib.auth import get_user_model
from django.db.models import QuerySet

from agents.models import AgentDefinition, Thread


def _locked() -> QuerySet[Thread]:
    return Thread.objects.select_for_update(no_key=True)


def thread(**match: Any) -> Thread | None:
    """Lock the thread's row that `match` finds (pk=..., or an external run's agent, requester
    and run id; status=... to take it only in that state), in the caller's transaction, and
    read it; None when there is none."""
    return _locked().filter(**match).first()


def thread_values(pk: UUID | str, *names: str, **match: Any) -> tuple[Any, ...] | None:
    """Lock the thread's row and read only the columns `names`; None when it is gone or does
    not match `match`."""
    return _locked().filter(pk=pk, **match).order_by().values_list(*names).first()


def threads(pks: Iterable[UUID]) -> None:
    """Lock several threads' rows, in the order of their ids."""
    list(_locked().filter(pk__in=sorted(set(pks))).order_by("pk").values_list("pk", flat=True))


def agent(**match: Any) -> None:
    """Lock the agent definition's row that `match` finds (pk=... or name=...)."""
    list(
        AgentDefinition.objects.select_for_update(no_key=True)
        .filter(**match)
        .order_by()
        .values_list("pk", flat=True)
    )


def user(pk: int) -> None:
    """Lock a user's row (what is counted per requester); after the agent's, never before."""
    users = get_user_model().objects.select_for_update(no_key=True)
    list(users.filter(pk=pk).order_by().values_list("pk", flat=True))
