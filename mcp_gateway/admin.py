"""Upstreams in the admin: edited there as in their agent file, each change kept as a version of
the agent definition their requests hang on (mcp_gateway.upstreams.mirror)."""

from typing import Any

from django import forms
from django.contrib import admin

from agents.agentfiles import AgentFileError
from mcp_gateway.models import Upstream, UpstreamCall
from mcp_gateway.upstreams import FIELDS, check, mirror


class UpstreamForm(forms.ModelForm):
    """Checked as a file's entry is (mcp_gateway.upstreams.check): the same refusals, in the
    same words, and the fields stored as a file would store them."""

    class Meta:
        model = Upstream
        exclude = ["source"]
        # An address without a scheme is refused by check() below, whatever Django assumes.
        field_classes = {"url": forms.CharField}

    def clean(self) -> dict[str, Any]:
        data = super().clean() or {}
        spec = {k: data[k] for k in FIELDS if data.get(k) not in (None, "", [], {})}
        try:
            data.update(check(spec, "this upstream"))
        except AgentFileError as e:
            raise forms.ValidationError(str(e)) from e
        return data


@admin.register(Upstream)
class UpstreamAdmin(admin.ModelAdmin):
    form = UpstreamForm
    list_display = ["name", "url", "revision", "trust_annotations", "updated_at"]
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
