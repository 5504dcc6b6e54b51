"""The engine's app: registers the tasks, checks and sub-agent tools when Django starts."""

import importlib

from django.apps import AppConfig
from django.conf import settings
from django.db.models.signals import post_migrate


class AgentsConfig(AppConfig):
    name = "agents"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self) -> None:
        # The Celery tasks, registered in every process: agents.dispatch sends them by name.
        from agents import checks, tasks  # noqa: F401 - registering is the import
        from agents.receipt_keys import made_with_the_tables
        from agents.runtime import subagents  # noqa: F401 - use_skill, use_agent, complete

        # The receipts' first signing key, made with the tables (agents.receipt_keys).
        post_migrate.connect(made_with_the_tables, sender=self)

        # The deployment's own tools: modules that register tools when imported.
        for module in settings.TOOL_MODULES:
            importlib.import_module(module)
