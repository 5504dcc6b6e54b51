"""The engine's rows in the admin: agent definitions are edited here; runs are only viewed."""

import json
from typing import Any

from django import forms
from django.contrib import admin
from django.contrib.auth.models import Group
from django.http import HttpRequest
from django.utils.html import format_html_join
from django.utils.safestring import mark_safe

from agents import rules, versions
from agents.models import (
    AgentDefinition,
    AgentVersion,
    Event,
    Grant,
    StackFrame,
    Suspension,
    Thread,
)
from agents.runtime import ladder


class ViewOnly:
    """A model admin (or inline) that shows rows and changes none, for everyone, superusers
    included: a thread, frame, suspension or event changes only through the actions
    (agents.starting, agents.decisions, ...) and the engine, which write the Event that is
    the audit trail; an edit here would write none. (A decision goes through the API, so it
    is conditional, audited and resumes the thread.)"""

    def has_add_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False

    def has_delete_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False


class LadderField(forms.CharField):
    """Reminders as a person writes them, "10m, 2m"; stored as seconds before the deadline."""

    def prepare_value(self, value: Any) -> Any:
        if isinstance(value, str):
            try:
                value = json.loads(value)
            except ValueError:
                return value
        if isinstance(value, list):
            return ", ".join(
                ladder.format_duration(v) if isinstance(v, int) else str(v) for v in value
            )
        return value

    # The field's value is the ladder its text says, not the text: a list where CharField
    # gives a string.
    def to_python(self, value: Any) -> list[int]:  # type: ignore[override]
        text = super().to_python(value)
        try:
            return list(ladder.parse_reminders(text)) if text else []
        except ValueError as e:
            raise forms.ValidationError(str(e)) from e


class AgentDefinitionForm(forms.ModelForm):
    reminders = LadderField(
        required=False,
        help_text="Before the deadline, earliest first: 10m, 2m (s, m or h).",
    )

    class Meta:
        model = AgentDefinition
        fields = "__all__"
        help_texts = {
            "escalate_to": "A group whose members are emailed and named on the card.",
            "escalate_at": "A step of the ladder (2: the second reminder) or a duration (5m).",
            "policy": (
                "Who may decide and how (agents.policy): groups, four_eyes, quorum, "
                'auto_approve, auto_reject, and "tools": {name: the same keys}. Example: '
                '{"groups": ["finance"], "quorum": 2, "auto_approve": '
                '[{"arg": "amount", "op": "<", "value": 100}]}'
            ),
        }

    def clean_policy(self) -> dict[str, Any]:
        """The agent file's checks (agents.agentfiles): the keys, the rules, the tools named
        being the agent's, and the groups existing."""
        value = self.cleaned_data.get("policy")
        tools = self.cleaned_data.get("tools")
        try:
            found = rules.check_policy(value, "policy", tools if isinstance(tools, list) else None)
        except rules.PolicyError as e:
            raise forms.ValidationError(str(e).removeprefix("policy: ")) from e
        named = rules.groups_named(found)
        missing = named - set(Group.objects.filter(name__in=named).values_list("name", flat=True))
        if missing:
            raise forms.ValidationError(f"No group is named {', '.join(sorted(missing))}.")
        return found

    def clean(self) -> dict[str, Any]:
        data = super().clean()
        assert data is not None  # a ModelForm's clean gives its cleaned_data
        if any(key in self.errors for key in ("reminders", "escalate_to", "escalate_at")):
            return data
        try:
            ladder.build_ladder(
                data.get("reminders") or None, data.get("escalate_to"), data.get("escalate_at")
            )
        except ValueError as e:
            raise forms.ValidationError(str(e)) from e
        group = data.get("escalate_to")
        if group and not Group.objects.filter(name=group).exists():
            self.add_error("escalate_to", f"No group is named {group!r}.")
        return data


@admin.register(AgentDefinition)
class AgentDefinitionAdmin(admin.ModelAdmin):
    form = AgentDefinitionForm
    list_display = ["name", "model", "version", "max_iterations", "updated_at"]
    search_fields = ["name", "description"]
    readonly_fields = ["version", "versions_kept"]

    @admin.display(description="Versions kept")
    def versions_kept(self, obj: AgentDefinition) -> str:
        """Every version kept (agents.versions): a change adds one, none is overwritten. Shown
        as text rather than an inline, so the form posts no formset for rows nobody edits."""
        rows = AgentVersion.objects.filter(agent=obj).order_by("-version")
        return (
            format_html_join(
                mark_safe("<br>"),
                "v{} · {} · {}…",
                (
                    (v.version, v.created_at.strftime("%Y-%m-%d %H:%M %Z"), v.digest[:12])
                    for v in rows
                ),
            )
            or "—"
        )

    def save_model(
        self, request: HttpRequest, obj: AgentDefinition, form: Any, change: bool
    ) -> None:
        super().save_model(request, obj, form, change)
        versions.record(obj, actor=request.user)


class StackFrameInline(ViewOnly, admin.TabularInline):
    model = StackFrame
    fields = ["depth", "agent_name", "agent_type", "status", "iteration", "max_iterations"]
    extra = 0


@admin.register(Thread)
class ThreadAdmin(ViewOnly, admin.ModelAdmin):
    list_display = ["id", "agent", "status", "created_by", "created_at"]
    list_filter = ["status", "agent"]
    inlines = [StackFrameInline]


@admin.register(StackFrame)
class StackFrameAdmin(ViewOnly, admin.ModelAdmin):
    list_display = ["thread", "depth", "agent_name", "agent_type", "status", "iteration"]
    list_filter = ["agent_type", "status"]


@admin.register(Suspension)
class SuspensionAdmin(ViewOnly, admin.ModelAdmin):
    list_display = [
        "id",
        "thread",
        "agent_name",
        "tool_name",
        "kind",
        "status",
        "decided_by",
        "expires_at",
    ]
    list_filter = ["status", "kind", "tool_name", "agent_name"]
    search_fields = ["id", "tool_name", "agent_name"]


@admin.register(Grant)
class GrantAdmin(ViewOnly, admin.ModelAdmin):
    """View-only: a grant is made with an approval and revoked on the Grants page, each an
    action with its event (agents.grants)."""

    list_display = ["id", "agent_name", "tool_name", "uses", "max_uses", "expires_at"]
    list_filter = ["agent_name", "tool_name"]


@admin.register(Event)
class EventAdmin(ViewOnly, admin.ModelAdmin):
    list_display = ["id", "type", "thread", "suspension", "actor", "created_at"]
    list_filter = ["type"]
