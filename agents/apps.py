"""The engine's app: registers the demo and sub-agent tools when Django starts."""

import importlib

from django.apps import AppConfig
from django.conf import settings


class AgentsConfig(AppConfig):
    name = "agents"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self) -> None:
        # The Celery tasks, registered in every process: agents.dispatch sends them by name.
        from agents import (  # noqa: F401 - registering is the import
            checks,
            demo_tools,
            tasks,
        )
        from agents.runtime import subagents  # noqa: F401 - use_skill, use_agent, complete

        # The deployment's own tools: modules that register tools when imported.
        for module in settings.TOOL_MODULES:
            importlib.import_module(module)
