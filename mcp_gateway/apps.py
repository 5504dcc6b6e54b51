"""The gateway as an MCP proxy: upstream MCP servers' tools behind the reviewers; a channel of
its own (ARCHITECTURE.md)."""

from django.apps import AppConfig


class MCPGatewayConfig(AppConfig):
    name = "mcp_gateway"
    verbose_name = "MCP gateway"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self) -> None:
        from agents.agentfiles import sections_loaded
        from mcp_gateway import upstreams

        sections_loaded.connect(upstreams.store_sections, dispatch_uid="mcp_gateway.upstreams")
