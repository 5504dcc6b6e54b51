"""Log lines that name what they are about: the ids of the thread, suspension, frame and Celery
task in hand, as fields of a JSON line (LOG_FORMAT=json) or kept off a plain one.

A Celery task's ids are bound for as long as it runs (task_prerun to task_postrun), from its
arguments by name (`thread_id`, `suspension_id`, `frame_id`) and its own id, so every line the
engine, the actions or Celery itself writes meanwhile carries them without the engine passing
them at each call. A call may still pass one through `extra=`; that one wins.
"""

import contextvars
import inspect
import logging
from typing import Any

from celery.signals import task_postrun, task_prerun
from pythonjsonlogger.json import JsonFormatter

# The ids a log line may carry, as named in a JSON line.
FIELDS = ("thread_id", "suspension_id", "frame_id", "task_id", "task")

# Each bind sets a new dict, never changes one, so a context sees only its own ids.
_bound: contextvars.ContextVar[dict[str, str] | None] = contextvars.ContextVar(
    "log_ids", default=None
)


def bind(**ids: object) -> contextvars.Token:
    """Add ids to the lines logged from here on in this context; `unbind` with the token."""
    known = {k: str(v) for k, v in ids.items() if k in FIELDS and v not in (None, "")}
    return _bound.set({**(_bound.get() or {}), **known})


def unbind(token: contextvars.Token) -> None:
    _bound.reset(token)


def bound() -> dict[str, str]:
    return dict(_bound.get() or {})


class ContextFilter(logging.Filter):
    """Copies the bound ids onto each record (never over one a call passed in `extra=`).
    Celery's own lines about a task outside it ("received", "retry") carry the task in their
    `data`; that gives the task's id and name."""

    def filter(self, record: logging.LogRecord) -> bool:
        for key, value in (_bound.get() or {}).items():
            if not hasattr(record, key):
                setattr(record, key, value)
        data = getattr(record, "data", None)
        if isinstance(data, dict) and "id" in data and not hasattr(record, "task_id"):
            record.task_id = str(data["id"])
            record.task = str(data.get("name", ""))
        return True


class JsonLines(JsonFormatter):
    """One JSON object per line: time (UTC, ISO 8601), level, logger, message, the ids that are
    known, anything else a call passed in `extra=`, and the traceback as `exc_info`."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(
            "{levelname}{name}{message}",
            style="{",
            rename_fields={"levelname": "level", "name": "logger"},
            timestamp="time",
        )


# Task arguments that name an id, read from each task's signature once.
_parameters: dict[str, list[str]] = {}


def _task_ids(task: Any, args: tuple, kwargs: dict) -> dict[str, Any]:
    names = _parameters.get(task.name)
    if names is None:
        try:
            names = list(inspect.signature(task.run).parameters)
        except (TypeError, ValueError):
            names = []
        _parameters[task.name] = names
    ids = dict(zip(names, args or (), strict=False))
    ids.update(kwargs or {})
    return {k: ids.get(k) for k in ("thread_id", "suspension_id", "frame_id")}


# Celery sends both signals in the process and thread that run the task (a pool thread, or a
# prefork child), around the task's own code and Celery's "succeeded"/"raised" line.
_tokens: dict[str, contextvars.Token] = {}


@task_prerun.connect(weak=False)
def _bind_task(
    task_id: str | None = None,
    task: Any = None,
    args: tuple = (),
    kwargs: dict | None = None,
    **_: Any,
) -> None:
    if task is None or task_id is None:
        return
    _tokens[task_id] = bind(task_id=task_id, task=task.name, **_task_ids(task, args, kwargs or {}))


@task_postrun.connect(weak=False)
def _unbind_task(task_id: str | None = None, **_: Any) -> None:
    token = _tokens.pop(task_id, None) if task_id else None
    if token is not None:
        unbind(token)


class NoClientErrors(logging.Filter):
    """Leaves out django.request's lines about 4xx answers (Django logs each at WARNING): the
    API answers 409, 403 or 404 by design, and the caller reads why in the answer. A 5xx, an
    ERROR, is kept. Used while LOG_LEVEL is unset (gateway/settings.py)."""

    def filter(self, record: logging.LogRecord) -> bool:
        status = getattr(record, "status_code", None)
        return not (isinstance(status, int) and 400 <= status < 500)
