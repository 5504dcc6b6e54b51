"""Every Celery task of the gateway has a kind, and so a soft and a hard time limit
(gateway/settings.py, TASK_KINDS), the soft one first."""

import pytest
from django.core.exceptions import ImproperlyConfigured

from gateway import settings as gateway_settings
from gateway.celery import app


def test_every_task_has_a_soft_and_a_hard_limit() -> None:
    app.loader.import_default_modules()
    ours = [name for name in app.tasks if not name.startswith("celery.")]
    assert ours
    for name in ours:
        task = app.tasks[name]
        assert task.soft_time_limit and task.time_limit, name
        assert task.soft_time_limit < task.time_limit, name


@pytest.mark.parametrize("value", ["soon", "0", "-1", "inf"])
def test_a_limit_is_a_number_of_seconds_above_zero(
    monkeypatch: pytest.MonkeyPatch, value: str
) -> None:
    monkeypatch.setenv("TOOL_TIME_LIMIT_SECONDS", value)
    with pytest.raises(ImproperlyConfigured, match="TOOL_TIME_LIMIT_SECONDS"):
        gateway_settings.envtimeout("TOOL_TIME_LIMIT_SECONDS", 300)
