"""Email in the admin: who opted in (editable), and the emails made (viewed only)."""

from django.contrib import admin

from agents.admin import ViewOnly
from notify.models import Email, EmailOptIn


@admin.register(EmailOptIn)
class EmailOptInAdmin(admin.ModelAdmin):
    list_display = ["user", "agent", "created_at"]
    list_filter = ["agent"]
    search_fields = ["user__username", "user__email"]
    autocomplete_fields = ["user"]


@admin.register(Email)
class EmailAdmin(ViewOnly, admin.ModelAdmin):
    list_display = ["created_at", "kind", "to", "subject", "status", "attempts", "finished_at"]
    list_filter = ["kind", "status"]
    search_fields = ["to", "subject", "key"]
