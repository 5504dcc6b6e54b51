"""The demo app: registers the demo tools when Django starts."""

from django.apps import AppConfig


class DemoConfig(AppConfig):
    name = "demo"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self) -> None:
        from demo import tools  # noqa: F401 - registering is the import
