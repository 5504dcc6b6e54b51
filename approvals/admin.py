"""API tokens in the admin: listed and revocable, never shown."""

from django.contrib import admin

from approvals.models import ApiToken


@admin.register(ApiToken)
class ApiTokenAdmin(admin.ModelAdmin):
    list_display = ["prefix", "user", "name", "created_at", "last_used_at"]
    readonly_fields = ["prefix", "created_at", "last_used_at"]
    fields = ["user", "name", "prefix", "created_at", "last_used_at"]

    def has_add_permission(self, request: object) -> bool:
        return False  # tokens are made by `manage.py create_api_token`, which shows them once
