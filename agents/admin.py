"""The engine's rows in the admin; events are read-only."""

from django.contrib import admin

from agents.models import AgentDefinition, DemoAction, Event, StackFrame, Suspension, Thread


@admin.register(AgentDefinition)
class AgentDefinitionAdmin(admin.ModelAdmin):
    list_display = ["name", "model", "max_iterations", "updated_at"]
    search_fields = ["name", "description"]


class StackFrameInline(admin.TabularInline):
    model = StackFrame
    fields = ["depth", "agent_name", "agent_type", "status", "iteration", "max_iterations"]
    readonly_fields = fields
    extra = 0
    can_delete = False


@admin.register(Thread)
class ThreadAdmin(admin.ModelAdmin):
    list_display = ["id", "agent", "status", "created_by", "created_at"]
    list_filter = ["status", "agent"]
    readonly_fields = ["lease_owner", "lease_expires_at", "runnable_since"]
    inlines = [StackFrameInline]


@admin.register(StackFrame)
class StackFrameAdmin(admin.ModelAdmin):
    list_display = ["thread", "depth", "agent_name", "agent_type", "status", "iteration"]
    list_filter = ["agent_type", "status"]


@admin.register(Suspension)
class SuspensionAdmin(admin.ModelAdmin):
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
    # Decisions go through the API, so they are conditional, audited and resume the thread.
    readonly_fields = [f.name for f in Suspension._meta.fields]

    def has_add_permission(self, request: object) -> bool:
        return False


@admin.register(Event)
class EventAdmin(admin.ModelAdmin):
    list_display = ["id", "type", "thread", "suspension", "actor", "created_at"]
    list_filter = ["type"]

    def has_add_permission(self, request: object) -> bool:
        return False

    def has_change_permission(self, request: object, obj: object = None) -> bool:
        return False

    def has_delete_permission(self, request: object, obj: object = None) -> bool:
        return False


@admin.register(DemoAction)
class DemoActionAdmin(admin.ModelAdmin):
    list_display = ["id", "tool", "summary", "thread", "created_at"]
