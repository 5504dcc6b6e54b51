"""The gateway as an A2A server: the agent card, the JSON-RPC endpoint (A2A 1.0 and 0.3) and
the push configs; a channel of its own (ARCHITECTURE.md)."""

from django.apps import AppConfig


class A2AServerConfig(AppConfig):
    name = "a2a_server"
    verbose_name = "A2A server"
    default_auto_field = "django.db.models.BigAutoField"
