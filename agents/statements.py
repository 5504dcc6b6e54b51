"""The statements every step and every decision makes, compiled once per process.

Each sits behind a function named for what it does (claim_lease, active_stack, mark_resumed,
...), so the engine, the decisions and the API call the function and never see
infra.compiled; one code path per statement (where a rarer case needs a statement of another
shape, the function chooses, as decide_pending does). The sentinels are values no real row
has.
"""

import functools
import uuid
from datetime import UTC, datetime, timedelta
from typing import Any

from django.db import DatabaseError
from django.db.models import Exists, Q
from django.utils import timezone

from agents.models import AgentDefinition, StackFrame, Suspension, Thread
from infra.compiled import Compiled, CompiledUpdate, fields

ACTIVE = StackFrame.Status.ACTIVE
S = Suspension.Status

# The active frames of a thread's main stack, or of one instance's lane, by depth: read at
# each step of every run, so compiled once per process (infra.compiled).
_MAIN_STACK = Compiled(
    lambda thread: (
        StackFrame.objects.filter(thread_id=thread, status=ACTIVE, lane__isnull=True)
        .order_by("depth")
        .values_list(*fields(StackFrame))
    ),
    uuid.UUID(int=1),
)
_LANE_STACK = Compiled(
    lambda thread, lane: (
        StackFrame.objects.filter(thread_id=thread, status=ACTIVE, lane_id=lane)
        .order_by("depth")
        .values_list(*fields(StackFrame))
    ),
    uuid.UUID(int=1),
    -7331,
)


# The writes of every step, compiled once per process (infra.compiled); the sentinels are
# values no real row has. A run claims a runnable thread whose lease is free...
_RUNNING = Thread.Status.RUNNING
_AT = datetime(2001, 2, 3, 4, 5, 6, 7, tzinfo=UTC)
_CLAIM = CompiledUpdate(
    lambda thread, owner, until, now: (
        Thread.objects.filter(pk=thread, status=_RUNNING).exclude(lease_expires_at__gt=now),
        {
            "lease_owner": owner,
            "lease_expires_at": until,
            "runnable_since": now,
            "requeues": 0,
            "running_tool": "",  # a dead worker's: its tool did not return
        },
    ),
    uuid.UUID(int=1),
    "(lease owner)",
    _AT,
    _AT + timedelta(microseconds=1),
)
# ...renews its lease at each checkpoint, saying which tool starts running (or none)...
_RENEW = CompiledUpdate(
    lambda thread, owner, until, tool: (
        Thread.objects.filter(pk=thread, lease_owner=owner, status=_RUNNING),
        {"lease_expires_at": until, "running_tool": tool},
    ),
    uuid.UUID(int=1),
    "(lease owner)",
    _AT,
    "(running tool)",
)
# ...and ends its step with the thread's new status, giving the lease back (Checkpoints._end).
_END = CompiledUpdate(
    lambda thread, owner, status, result, error, now: (
        Thread.objects.filter(pk=thread, lease_owner=owner, status=_RUNNING),
        {
            "status": status,
            "result": result,
            "error": error,
            "lease_owner": "",
            "lease_expires_at": None,
            "running_tool": "",
            "updated_at": now,
        },
    ),
    uuid.UUID(int=1),
    "(lease owner)",
    "(status)",
    "(result)",
    "(error)",
    _AT,
)
# The frame's checkpoint (Checkpoints._save), and the one that ends it.
_FRAME_FIELDS = ("messages", "iteration", "input_tokens", "output_tokens", "tools_used")
_FRAME_SENTINELS = ([{"(messages)": 1}], -7331, -7332, -7333, ["(tools used)"], _AT)
_SAVE_FRAME = CompiledUpdate(
    lambda frame, *values: (
        StackFrame.objects.filter(pk=frame),
        dict(zip((*_FRAME_FIELDS, "updated_at"), values, strict=True)),
    ),
    -7330,
    *_FRAME_SENTINELS,
)
_SAVE_ENDED_FRAME = CompiledUpdate(
    lambda frame, *values: (
        StackFrame.objects.filter(pk=frame),
        dict(zip((*_FRAME_FIELDS, "updated_at", "status", "result"), values, strict=True)),
    ),
    -7330,
    *_FRAME_SENTINELS,
    "(status)",
    "(result)",
)


# A frame's suspensions for some of its tool uses, read at each step that raises or resumes
# them: compiled once per process for each number of tool uses (a step has one, or a few).
@functools.cache
def _raised(uses: int) -> Compiled:
    """The (tool_use_id, status) of the frame's suspensions for `uses` tool uses."""
    return Compiled(
        lambda frame, *ids: Suspension.objects.filter(
            frame_id=frame, tool_use_id__in=ids
        ).values_list("tool_use_id", "status"),
        -7331,
        *(f"(tool use {i})" for i in range(uses)),
    )


@functools.cache
def _mark_resumed(n: int) -> CompiledUpdate:
    """Suspension.objects.filter(pk__in=<n ids>, resumed_at__isnull=True)
    .update(resumed_at=now)."""
    return CompiledUpdate(
        lambda now, *ids: (
            Suspension.objects.filter(pk__in=ids, resumed_at__isnull=True),
            {"resumed_at": now},
        ),
        _AT,
        *(uuid.UUID(int=i + 1) for i in range(n)),
    )


@functools.cache
def _decided(uses: int) -> Compiled:
    """The frame's decided suspensions (whole rows) for `uses` tool uses."""
    return Compiled(
        lambda frame, *ids: (
            Suspension.objects.filter(frame_id=frame, tool_use_id__in=ids)
            .exclude(status=Suspension.Status.PENDING)
            .values_list(*fields(Suspension))
        ),
        -7331,
        *(f"(tool use {i})" for i in range(uses)),
    )


# The thread a run drives, with its agent: read at the start of every step.
_THREAD_WITH_AGENT = Compiled(
    lambda thread: Thread.objects.filter(pk=thread).values_list(
        *fields(Thread), *(f"agent__{name}" for name in fields(AgentDefinition))
    ),
    uuid.UUID(int=1),
)


def active_stack(thread_id: uuid.UUID, lane_id: int | None = None) -> list[StackFrame]:
    """The active frames of the thread's main stack (or of the lane `lane_id`), by depth."""
    if lane_id is None:
        return _MAIN_STACK.instances(StackFrame, thread_id)
    return _LANE_STACK.instances(StackFrame, thread_id, lane_id)


def claim_lease(thread_id: uuid.UUID | str, owner: str, until: datetime, now: datetime) -> int:
    """Take a runnable thread whose lease is free; 1 when taken."""
    return _CLAIM.run(thread_id, owner, until, now)


def renew_lease(thread_id: uuid.UUID, owner: str, until: datetime, tool: str = "") -> int:
    """Extend a running thread's lease held by `owner`, with the tool that starts running
    (empty: none runs); 0 when the lease is no longer held or the thread is being cancelled."""
    return _RENEW.run(thread_id, owner, until, tool[:200])


def end_step(
    thread_id: uuid.UUID, owner: str, status: str, result: str, error: str, now: datetime
) -> int:
    """The thread's new status, result and error, the lease given back, if `owner` holds it."""
    return _END.run(thread_id, owner, status, result, error, now)


def save_frame(row: StackFrame, ended: bool = False) -> None:
    """row.save(update_fields=[...]) of a frame's checkpoint: its messages, iteration, tokens,
    tools used and updated_at (set now, as auto_now would), and its status and result when
    the frame `ended`."""
    row.updated_at = timezone.now()
    values: tuple[Any, ...] = (row.messages, row.iteration, row.input_tokens)
    values += (row.output_tokens, row.tools_used, row.updated_at)
    if ended:
        n = _SAVE_ENDED_FRAME.run(row.pk, *values, row.status, row.result)
    else:
        n = _SAVE_FRAME.run(row.pk, *values)
    if not n:
        raise DatabaseError("Save with update_fields did not affect any rows.")


def raised(frame_id: int, tool_use_ids: list[str]) -> dict[str, str]:
    """The status of the frame's suspensions for these tool uses, by tool_use id."""
    return dict(_raised(len(tool_use_ids)).rows(frame_id, *tool_use_ids))


def mark_resumed(ids: list[uuid.UUID], now: datetime) -> int:
    """Stamp resumed_at on the suspensions `ids` that have none yet."""
    return _mark_resumed(len(ids)).run(now, *ids)


def decided(frame_id: int, tool_use_ids: list[str]) -> list[Suspension]:
    """The frame's decided suspensions for these tool uses."""
    return _decided(len(tool_use_ids)).instances(Suspension, frame_id, *tool_use_ids)


def thread_with_agent(thread_id: uuid.UUID | str) -> Thread:
    """Thread.objects.select_related("agent").get(pk=thread_id), through a statement compiled
    once per process (infra.compiled)."""
    rows = _THREAD_WITH_AGENT.rows(thread_id)
    if not rows:
        raise Thread.DoesNotExist(thread_id)
    names = fields(Thread)
    thread = Thread.from_db("default", names, rows[0][: len(names)])
    thread.agent = AgentDefinition.from_db(
        "default", fields(AgentDefinition), rows[0][len(names) :]
    )
    return thread


# decide's locks: every decision takes them.
_LOCK_THREAD = Compiled(
    lambda pk: (
        Thread.objects.select_for_update(no_key=True)
        .filter(pk=pk)
        .order_by()
        .values_list("created_by_id")[:1]
    ),
    uuid.UUID(int=1),
)
_LOCK_SUSPENSION = Compiled(
    lambda pk: (
        Suspension.objects.select_for_update()
        .filter(pk=pk)
        .order_by()
        .values_list(*fields(Suspension))[:1]
    ),
    uuid.UUID(int=1),
)


# A pending suspension, before its deadline, approved or rejected by a person (decide).
# The receipt (agents.receipts) is signed before, under the same locks, and written with it.
_DECIDED_FIELDS = {"status", "approved", "reason", "modified_args", "receipt", "receipt_seq"}
_DECIDED_FIELDS |= {"tier"}  # who decided (agents.tiers): a person, or a model at this door
_DECIDE = CompiledUpdate(
    lambda pk, now, by, name, status, approved, reason, args, receipt, seq, tier: (
        Suspension.objects.filter(pk=pk, status=S.PENDING).filter(
            Q(expires_at__isnull=True) | Q(expires_at__gt=now)
        ),
        {
            "decided_by_id": by,
            "decided_by_name": name,
            "decided_at": now,
            "status": status,
            "approved": approved,
            "reason": reason,
            "modified_args": args,
            "receipt": receipt,
            "receipt_seq": seq,
            "tier": tier,
        },
    ),
    uuid.UUID(int=1),
    _AT,
    -7331,
    "(decided by)",
    "(status)",
    True,
    "(reason)",
    {"(modified args)": 1},
    "(receipt)",
    -7332,
    "(tier)",
)


# Thread.objects.filter(pk=thread, status=SUSPENDED), with none of the group pending and the
# frame on the main stack (no lane), made runnable: compiled once, as the ORM rebuilt its two
# subqueries at every decision (bench/README.md).
_RESUME_MAIN_STACK = CompiledUpdate(
    lambda thread, group, frame, now: (
        Thread.objects.filter(pk=thread, status=Thread.Status.SUSPENDED)
        .filter(~Exists(Suspension.objects.filter(group=group, status=S.PENDING)))
        .filter(Exists(StackFrame.objects.filter(pk=frame, lane__isnull=True))),
        {"status": Thread.Status.RUNNING, "runnable_since": now, "updated_at": now},
    ),
    uuid.UUID(int=1),
    uuid.UUID(int=2),
    -7330,
    datetime(2001, 2, 3, 4, 5, 6, tzinfo=UTC),
)


def lock_thread(thread_id: uuid.UUID) -> list[tuple[int | None]]:
    """Lock the thread's row: [(created_by_id,)], or [] when it is gone."""
    return _LOCK_THREAD.rows(thread_id)


def lock_suspension(suspension_id: uuid.UUID) -> Suspension | None:
    """Lock the suspension's row and read it."""
    return next(iter(_LOCK_SUSPENSION.instances(Suspension, suspension_id)), None)


def decide_pending(
    suspension_id: uuid.UUID, now: datetime, user: Any, columns: dict[str, Any]
) -> int:
    """A person's decision of a pending suspension before its deadline: `columns` is what it
    sets (status, approved, reason, modified_args, the receipt and the tier for an approval
    or a rejection; status, approved, response, the receipt and the tier for an answer). 1
    when this call decided it."""
    by, name = getattr(user, "pk", None), getattr(user, "username", "")
    if columns.keys() == _DECIDED_FIELDS and by is not None:
        # An approval or a rejection by a person's account: compiled once.
        values = (columns["status"], columns["approved"], columns["reason"])
        signed = (columns["modified_args"], columns["receipt"], columns["receipt_seq"])
        return _DECIDE.run(suspension_id, now, by, name, *values, *signed, columns["tier"])
    # An answer, or a decision with no account behind it: a statement of another shape.
    return (
        Suspension.objects.filter(pk=suspension_id, status=S.PENDING)
        .filter(Q(expires_at__isnull=True) | Q(expires_at__gt=now))
        .update(decided_by=user, decided_by_name=name, decided_at=now, **columns)
    )


def resume_main_stack(thread_id: uuid.UUID, group: uuid.UUID, frame_id: int, now: datetime) -> int:
    """A suspended thread runs again when none of the group waits and the frame is on its
    main stack; 1 when it was made runnable."""
    return _RESUME_MAIN_STACK.run(thread_id, group, frame_id, now)


# What the API reads of an agent and of a suspension at every start and every decision.
_AGENT_NAMED = Compiled(
    lambda name: AgentDefinition.objects.filter(name=name).values_list(*fields(AgentDefinition)),
    "(agent name)",
)
# What agents.versions compares a suspension with at every decision: only these columns.
_AGENT_NOW = Compiled(
    lambda name: (
        AgentDefinition.objects.filter(name=name)
        .order_by()
        .values_list("pk", "version", "tool_overrides")[:1]
    ),
    "(agent name)",
)
_SUSPENSION = Compiled(
    lambda pk: Suspension.objects.filter(pk=pk).values_list(*fields(Suspension)).order_by()[:1],
    uuid.UUID(int=1),
)
_SUSPENSION_OF_THREAD = Compiled(
    lambda pk, thread: (
        Suspension.objects.filter(pk=pk, thread_id=thread)
        .values_list(*fields(Suspension))
        .order_by()[:1]
    ),
    uuid.UUID(int=1),
    uuid.UUID(int=2),
)


def agent_named(name: str) -> AgentDefinition | None:
    """The agent of that name."""
    return next(iter(_AGENT_NAMED.instances(AgentDefinition, name)), None)


def agent_now(name: str) -> tuple[Any, int, Any] | None:
    """The agent's (id, version, tool_overrides) as they are now; None when it is gone."""
    found = _AGENT_NOW.rows(name)
    return found[0] if found else None


def suspension(suspension_id: Any, thread_id: Any = None) -> Suspension | None:
    """The suspension, if it is `thread_id`'s (when given)."""
    if thread_id is None:
        found = _SUSPENSION.instances(Suspension, suspension_id)
    else:
        found = _SUSPENSION_OF_THREAD.instances(Suspension, suspension_id, thread_id)
    return found[0] if found else None
