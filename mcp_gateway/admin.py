"""Upstreams in the admin: edited there as in their agent file, each change kept as a version of
the agent definition their requests hang on (mcp_gateway.upstreams.mirror)."""

from typing import Any

from django.contrib import admin

from mcp_gateway.models import Upstream, UpstreamCall
from mcp_gateway.upstreams import mirror


@admin.register(Upstream)
class UpstreamAdmin(admin.ModelAdmin):
    list_display = ["name", "url", "trust_annotations", "updated_at"]
    search_fields = ["name", "url"]
    # Headers are kept as written: `${NAME}` is read from the environment at call time
    # (mcp_gateway.upstreams.expand), so no secret is shown here.
    readonly_fields = ["source", "updated_at"]

    def save_model(self, request: Any, obj: Upstream, form: Any, change: bool) -> None:
        super().save_model(request, obj, form, change)
        mirror(obj, request.user)


@admin.register(UpstreamCall)
class UpstreamCallAdmin(admin.ModelAdmin):
    """The calls approved requests allowed: read only (a worker writes them)."""

    list_display = ["suspension", "state", "worker", "claimed_at", "finished_at"]
    list_filter = ["state"]

    def has_add_permission(self, request: Any) -> bool:
        return False

    def has_change_permission(self, request: Any, obj: Any = None) -> bool:
        return False

    def has_delete_permission(self, request: Any, obj: Any = None) -> bool:
        return False
