"""Reminders and escalation before a deadline: how a ladder is written, and when its steps fall.

An agent file writes a ladder as

    reminders: [10m, 2m]      # durations before the deadline (s, m or h; a bare number is seconds)
    escalate_to: leads        # a group name
    escalate_at: 2            # the 2nd reminder, or a duration before the deadline ("5m")

Reminders go out earliest first (the longest duration first), so step N of the ladder is the
N-th reminder to go out. Everything is stored in seconds before the deadline, so a deadline
moved by an extension moves every step with it (agents.reminders.extend).
"""

import re
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

UNITS = {"s": 1, "m": 60, "h": 3600}
DURATION = re.compile(r"^\s*(\d+)\s*([smh])\s*$")
# Longer than any deadline worth waiting on; keeps a typo like 100000h out of the timestamps.
MAX_SECONDS = 30 * 24 * 3600
MAX_STEPS = 10


def parse_duration(value: Any, what: str = "a duration") -> int:
    """Seconds from `90s`, `10m`, `1h` or a whole number of seconds; refuses anything else."""
    if isinstance(value, int) and not isinstance(value, bool):
        seconds = value
    elif isinstance(value, str) and (match := DURATION.match(value)):
        seconds = int(match.group(1)) * UNITS[match.group(2)]
    else:
        raise ValueError(f"{what} must be like 90s, 10m or 1h, not {value!r}")
    if not 0 < seconds <= MAX_SECONDS:
        raise ValueError(f"{what} must be more than 0 and at most 30 days, not {value!r}")
    return seconds


def parse_reminders(value: Any) -> tuple[int, ...]:
    """The reminder times in seconds before the deadline, earliest reminder first."""
    if isinstance(value, str):
        value = [part for part in value.split(",") if part.strip()]
    if not isinstance(value, list | tuple):
        raise ValueError(f"reminders must be a list like [10m, 2m], not {value!r}")
    if len(value) > MAX_STEPS:
        raise ValueError(f"reminders: at most {MAX_STEPS} steps")
    seconds = [parse_duration(v, "each reminder") for v in value]
    if len(set(seconds)) != len(seconds):
        raise ValueError("reminders: two reminders at the same time")
    return tuple(sorted(seconds, reverse=True))


def format_duration(seconds: int) -> str:
    """The shortest exact way to write it back: 600 → 10m, 90 → 90s."""
    for unit in ("h", "m"):
        if seconds % UNITS[unit] == 0:
            return f"{seconds // UNITS[unit]}{unit}"
    return f"{seconds}s"


@dataclass(frozen=True)
class Ladder:
    """What a suspension is given when it is raised; all in seconds before its deadline."""

    reminders: tuple[int, ...] = ()
    escalate_to: str = ""
    escalate_before: int | None = None


def build_ladder(reminders: Any = None, escalate_to: Any = None, escalate_at: Any = None) -> Ladder:
    """A ladder from the three fields as an agent file or the admin writes them.

    `escalate_at` is a step of the ladder (an int: 1 is the first reminder) or a duration
    before the deadline ("5m"). Left out, escalation goes with the last reminder.
    """
    steps = parse_reminders(reminders) if reminders not in (None, "") else ()
    group = escalate_to or ""
    if not isinstance(group, str) or len(group) > 150:
        raise ValueError(f"escalate_to must be a group name, not {escalate_to!r}")
    group = group.strip()
    if escalate_at in (None, ""):
        if not group:
            return Ladder(steps)
        if not steps:
            raise ValueError("escalate_to needs escalate_at (a duration such as 5m) or reminders")
        return Ladder(steps, group, steps[-1])
    if not group:
        raise ValueError("escalate_at needs escalate_to (the group to escalate to)")
    if isinstance(escalate_at, int) and not isinstance(escalate_at, bool):
        if not 1 <= escalate_at <= len(steps):
            raise ValueError(
                f"escalate_at {escalate_at} names a step of the ladder, but it has "
                f"{len(steps)} reminder(s); write a duration such as 5m for a time instead"
            )
        return Ladder(steps, group, steps[escalate_at - 1])
    if isinstance(escalate_at, str) and escalate_at.strip().isdigit():
        step = int(escalate_at)
        if 1 <= step <= len(steps):
            return Ladder(steps, group, steps[step - 1])
        raise ValueError(
            f"escalate_at {escalate_at!r}: a step must be 1 to {len(steps)}; "
            "a duration needs its unit (s, m or h)"
        )
    return Ladder(steps, group, parse_duration(escalate_at, "escalate_at"))


@dataclass(frozen=True)
class Due:
    """Where a suspension's ladder stands at `now`."""

    reminders: int  # how many reminders have fallen due by now (of the whole ladder)
    escalate: bool  # escalation has fallen due


def due(
    expires_at: datetime,
    reminders: list[int] | tuple[int, ...],
    escalate_before: int | None,
    now: datetime,
) -> Due:
    return Due(
        reminders=sum(1 for r in reminders if expires_at - timedelta(seconds=r) <= now),
        escalate=escalate_before is not None
        and expires_at - timedelta(seconds=escalate_before) <= now,
    )


def next_step_at(
    expires_at: datetime | None,
    reminders: list[int] | tuple[int, ...],
    reminders_sent: int,
    escalate_before: int | None,
    escalated: bool,
) -> datetime | None:
    """When the next step is due: the next reminder or the escalation, whichever is first."""
    if expires_at is None:
        return None
    times = []
    if reminders_sent < len(reminders):
        times.append(expires_at - timedelta(seconds=reminders[reminders_sent]))
    if escalate_before is not None and not escalated:
        times.append(expires_at - timedelta(seconds=escalate_before))
    return min(times) if times else None
