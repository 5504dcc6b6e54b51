"""Slack in the admin: who is linked to which Slack account (reviewers link themselves on the
Slack page, slack_approvals.connect; an admin may still add or remove a link here), the routes
agent files set, and the delivery log with each attempt, read only."""

from django.contrib import admin

from slack_approvals.models import SlackAttempt, SlackDelivery, SlackLink, SlackRoute


@admin.register(SlackLink)
class SlackLinkAdmin(admin.ModelAdmin):
    list_display = ["user", "slack_user_id", "linked_at"]
    search_fields = ["user__username", "slack_user_id"]
    autocomplete_fields = ["user"]


@admin.register(SlackRoute)
class SlackRouteAdmin(admin.ModelAdmin):
    """Set by agent files (slack_approvals.routes): shown, never edited here."""

    list_display = ["agent", "channel", "dm", "source", "updated_at"]

    def has_add_permission(self, request: object) -> bool:
        return False

    def has_change_permission(self, request: object, obj: object = None) -> bool:
        return False


class AttemptInline(admin.TabularInline):
    model = SlackAttempt
    extra = 0
    can_delete = False
    fields = ["number", "started_at", "succeeded", "status_code", "error"]
    readonly_fields = fields

    def has_add_permission(self, request: object, obj: object = None) -> bool:
        return False


@admin.register(SlackDelivery)
class SlackDeliveryAdmin(admin.ModelAdmin):
    list_display = ["id", "action", "suspension", "channel", "dm_user", "status", "attempts"]
    list_filter = ["status", "action"]
    inlines = [AttemptInline]
    readonly_fields = [
        "event",
        "suspension",
        "action",
        "channel",
        "dm_user",
        "status",
        "attempts",
        "next_attempt_at",
        "last_error",
        "finished_at",
        "created_at",
    ]

    def has_add_permission(self, request: object) -> bool:
        return False

    def has_change_permission(self, request: object, obj: object = None) -> bool:
        return False
