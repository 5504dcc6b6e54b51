"""The engine's app: registers the demo tools when Django starts."""

from django.apps import AppConfig


class AgentsConfig(AppConfig):
    name = "agents"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self) -> None:
        from agents import checks, demo_tools  # noqa: F401 - registering is the import
