"""Reading tasks: a task as its rows say now, lists of tasks, and the events a stream reads.

Blocking code (the ORM): a2a_server.handler calls it from worker threads.
"""

import base64
import binascii
import contextlib
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any
from uuid import UUID

from a2a.types import (
    ListTasksRequest,
    ListTasksResponse,
    Task,
    TaskState,
    UnsupportedOperationError,
)
from django.db import connection, transaction
from django.db.models import Exists, Max, OuterRef, Q, QuerySet

from a2a_server import mapping
from a2a_server.access import VIEW, find_thread, invalid, require, require_scope, see
from access import scopes
from access.models import Scope
from access.revocation import revocations
from agents.cursor import gap_horizon, page_cursor
from agents.models import Event, Suspension, Thread
from agents.payloads import suspension_payload
from approvals.http import parse_uuid
from infra import transactions

PAGE_SIZE = 50  # a list's default page, and its largest below
MAX_PAGE_SIZE = 100
MAX_HISTORY = 200  # messages of history a task shows at most (the most recent ones)
BATCH = 500  # events a stream reads at a time
GAP_SCAN = 1000  # event ids a stream steps over one by one past the settled ones

S = Suspension.Status
ACTIVE = (Thread.Status.RUNNING, Thread.Status.SUSPENDED)


@contextlib.contextmanager
def consistent_read() -> Iterator[None]:
    """Several reads that see one moment of the database: a task's status, its suspensions and
    its last event id agree. PostgreSQL needs REPEATABLE READ for it (its default lets each
    statement see newer commits); a SQLite transaction sees one snapshot already."""
    outer = transactions.in_transaction()
    with transaction.atomic():
        if not outer and connection.vendor == "postgresql":
            with connection.cursor() as cursor:
                cursor.execute("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ")
        yield


def settled_through() -> int:
    """An event id up to which every event that will ever exist has committed, by the rules of
    agents.cursor: a stream that reads no further never steps over an event still being
    written (on PostgreSQL, ids can become visible out of order)."""
    horizon = gap_horizon()  # first: the rows it vouches for are read after it
    newest = Event.objects.aggregate(m=Max("id"))["m"] or 0
    if horizon >= newest:
        return newest
    bound = max(horizon, page_cursor())
    following = Event.objects.filter(id__gt=bound).order_by("id").values_list("id", flat=True)
    for pk in following[:GAP_SCAN]:
        if pk != bound + 1:
            break
        bound = pk
    return bound


@dataclass(frozen=True)
class Snapshot:
    task: Task
    state: int
    cursor: int  # every event of the task up to this id is reflected in `task`
    # The revocation counter, read after the task's rows: a stream or a waiting SendMessage
    # sends the task only to a caller the hub clears against it (access.clearance).
    revocations: int


def snapshot(task_id: str, history_length: int | None = None) -> Snapshot:
    """The task as its rows say now, the event id a stream of its updates goes on from, and
    the revocation counter read after them."""
    bound = settled_through()
    with consistent_read():
        thread = find_thread(task_id)
        waits = [suspension_payload(s) for s in pending(thread)]
        prompt = _prompt(thread.pk) if thread.status == Thread.Status.WAITING_INPUT else None
        last = thread.events.aggregate(m=Max("id"))["m"] or 0
        history = _history(thread.pk, history_length)
    # After the read's transaction, so a revocation that committed before any of its rows is
    # counted (a REPEATABLE READ snapshot would show the counter as it was at its start).
    counted = revocations()
    cursor = min(last, bound)
    task = mapping.build_task(thread, waits, prompt, history, cursor)
    return Snapshot(task, task.status.state, cursor, counted)


def pending(thread: Thread) -> QuerySet:
    """The pending suspensions of a thread, oldest first."""
    return thread.suspensions.filter(status=S.PENDING).order_by("created_at", "id")


def _prompt(thread_id: UUID) -> dict[str, Any] | None:
    """The INPUT_REQUIRED payload of a thread's wait for input: what it asked, what it takes."""
    return (
        Event.objects.filter(thread_id=thread_id, type=Event.Type.INPUT_REQUIRED)
        .order_by("-id")
        .values_list("payload", flat=True)
        .first()
    )


def _history(thread_id: UUID, length: int | None) -> list[Event]:
    length = MAX_HISTORY if length is None else min(length, MAX_HISTORY)
    if length <= 0:
        return []
    rows = Event.objects.filter(thread_id=thread_id, type__in=mapping.HISTORY_TYPES)
    return list(reversed(rows.order_by("-id")[:length]))


def _history_length(value: int | None, field: str) -> int | None:
    if value is not None and value < 0:
        raise invalid("Zero or more messages.", field)
    return value


def get_task(user: Any, task_id: str, history_length: int | None) -> Task:
    require(user, VIEW, "see tasks")
    see(user, find_thread(task_id))
    return snapshot(task_id, _history_length(history_length, "historyLength")).task


def subscription(user: Any, task_id: str) -> Snapshot:
    """Where SubscribeToTask starts: the task now, which must not have ended."""
    require(user, VIEW, "see tasks")
    see(user, find_thread(task_id))
    found = snapshot(task_id)
    if found.state in mapping.TERMINAL:
        name = TaskState.Name(found.state)
        raise UnsupportedOperationError(
            f"The task has ended ({name}): SubscribeToTask takes a task that has not; "
            "GetTask shows how it ended."
        )
    return found


def state_of(task_id: str) -> int:
    """The task's state, read cheaply (a SendMessage waits on it)."""
    status = Thread.objects.filter(pk=task_id).values_list("status", flat=True).first()
    pending = Suspension.objects.filter(thread_id=task_id, status=S.PENDING).exists()
    return mapping.task_state(status or "", pending)


def read_events(task_id: str, after: int) -> tuple[list[Event], bool, int]:
    """The task's events after `after`, in id order, up to the settled ones; whether there may
    be more right away (the batch was full); and the revocation counter read after them, when
    there are any (access.clearance)."""
    bound = settled_through()
    rows = list(
        Event.objects.filter(thread_id=task_id, id__gt=after, id__lte=bound).order_by("id")[:BATCH]
    )
    return rows, len(rows) == BATCH, revocations() if rows else 0


def in_state(rows: QuerySet, state: int) -> QuerySet:
    """The threads whose task is in `state`. Input-required is what waits for a person: a
    thread waiting for a reply, or with a pending suspension (the inbox's set)."""
    if state == TaskState.TASK_STATE_UNSPECIFIED:
        return rows
    rows = rows.annotate(
        waits=Exists(Suspension.objects.filter(thread=OuterRef("pk"), status=S.PENDING))
    )
    if state == mapping.INPUT_REQUIRED:
        return rows.exclude(status__in=mapping.ENDED).filter(
            Q(status=Thread.Status.WAITING_INPUT) | Q(waits=True)
        )
    if state == mapping.WORKING:
        return rows.filter(status__in=ACTIVE, waits=False)
    ended = [status for status, s in mapping.ENDED.items() if s == state]
    return rows.filter(status__in=ended) if ended else rows.none()


BAD_TOKEN = "Not a page token this server gave: send nextPageToken as it came."


def encode_token(updated_at: datetime, pk: UUID) -> str:
    return base64.urlsafe_b64encode(f"{updated_at.isoformat()}|{pk}".encode()).decode()


def decode_token(token: str, field: str) -> tuple[datetime, str]:
    try:
        stamp, pk = base64.urlsafe_b64decode(token.encode()).decode().split("|")
        parsed = datetime.fromisoformat(stamp)
    except (ValueError, binascii.Error, UnicodeDecodeError) as e:
        raise invalid(BAD_TOKEN, field) from e
    if parse_uuid(pk) is None:
        raise invalid(BAD_TOKEN, field)
    return parsed, pk


def list_tasks(user: Any, request: ListTasksRequest) -> ListTasksResponse:
    """Tasks, most recently updated first, a page at a time (a keyset token)."""
    require(user, VIEW, "see tasks")
    require_scope(user, (Scope.READ, Scope.RUNS), "see tasks")
    size = request.page_size if request.HasField("page_size") else PAGE_SIZE
    if not 1 <= size <= MAX_PAGE_SIZE:
        raise invalid(f"From 1 to {MAX_PAGE_SIZE}.", "pageSize")
    history = request.history_length if request.HasField("history_length") else 0
    _history_length(history, "historyLength")
    if request.status not in TaskState.values():
        raise invalid("Not a task state.", "status")
    rows = Thread.objects.all()
    if scopes.own_runs_only(user):
        rows = rows.filter(created_by=user)  # a runs-only token lists its user's own tasks
    rows = in_state(rows, request.status)
    if request.context_id:
        pk = parse_uuid(request.context_id)
        rows = rows.filter(pk=pk) if pk else rows.none()
    if request.HasField("status_timestamp_after"):
        rows = rows.filter(updated_at__gte=request.status_timestamp_after.ToDatetime(tzinfo=UTC))
    bound = settled_through()
    with consistent_read():
        total = rows.count()  # the whole filtered set, as totalSize means, on every page
        if request.page_token:
            updated, pk = decode_token(request.page_token, "pageToken")
            rows = rows.filter(Q(updated_at__lt=updated) | Q(updated_at=updated, pk__lt=pk))
        page = list(rows.select_related("agent").order_by("-updated_at", "-pk")[: size + 1])
        more = len(page) > size
        page = page[:size]
        tasks = _tasks(page, history, bound, artifacts=request.include_artifacts)
    response = ListTasksResponse(
        next_page_token=encode_token(page[-1].updated_at, page[-1].pk) if more else "",
        page_size=size,
        total_size=total,
    )
    response.tasks.extend(tasks)
    return response


def _tasks(page: list[Thread], history: int, bound: int, artifacts: bool) -> list[Task]:
    """The tasks of a page of threads, in a few queries whatever the page's size."""
    ids = [t.pk for t in page]
    waits: dict[Any, list[dict[str, Any]]] = {}
    for s in Suspension.objects.filter(thread_id__in=ids, status=S.PENDING).order_by(
        "created_at", "id"
    ):
        waits.setdefault(s.thread_id, []).append(suspension_payload(s))
    waiting = [t.pk for t in page if t.status == Thread.Status.WAITING_INPUT]
    prompts: dict[Any, dict[str, Any]] = {}
    if waiting:
        asked = Event.objects.filter(thread_id__in=waiting, type=Event.Type.INPUT_REQUIRED)
        for thread_id, payload in asked.order_by("id").values_list("thread_id", "payload"):
            prompts[thread_id] = payload  # the latest wins
    last = dict(
        Event.objects.filter(thread_id__in=ids)
        .values("thread_id")
        .annotate(m=Max("id"))
        .values_list("thread_id", "m")
    )
    return [
        mapping.build_task(
            t,
            waits.get(t.pk, []),
            prompts.get(t.pk),
            _history(t.pk, history) if history else [],
            min(last.get(t.pk) or 0, bound),
            artifacts=artifacts,
        )
        for t in page
    ]
