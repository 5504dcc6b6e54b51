"""Slack in the admin: who is linked to which Slack account (reviewers link themselves on the
Slack page, slack_approvals.connect; an admin may still add or remove a link here), the routes
agent files set, and the delivery log with each attempt, read only."""

from typing import Any

from django.contrib import admin
from django.db.models import QuerySet
from django.http import HttpRequest

from slack_approvals import links
from slack_approvals.models import SlackAttempt, SlackDelivery, SlackLink, SlackRoute


@admin.register(SlackLink)
class SlackLinkAdmin(admin.ModelAdmin):
    """Links added and removed through slack_approvals.links, audited as any other way's, the
    admin as the actor. A link is not edited in place (remove it, add another): each change
    is one of the two audited ones."""

    list_display = ["user", "slack_user_id", "linked_at"]
    search_fields = ["user__username", "slack_user_id"]
    autocomplete_fields = ["user"]

    def has_change_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False

    def save_model(self, request: HttpRequest, obj: Any, form: Any, change: bool) -> None:
        made = links.link(obj.user, obj.slack_user_id, via="admin", actor=request.user)
        obj.pk, obj.linked_at = made.pk, made.linked_at  # the admin's log and message name it

    def delete_model(self, request: HttpRequest, obj: Any) -> None:
        links.unlink(obj.user, via="admin", actor=request.user)

    def delete_queryset(self, request: HttpRequest, queryset: QuerySet) -> None:
        for found in queryset.select_related("user"):
            links.unlink(found.user, via="admin", actor=request.user)


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
