"""API tokens in the admin: listed, read-only and revocable, never shown; reviewers' passkeys, read
only."""

from django.contrib import admin, messages
from django.db.models import QuerySet
from django.http import HttpRequest

from access import tokens
from access.models import ApiToken, Passkey


@admin.register(ApiToken)
class ApiTokenAdmin(admin.ModelAdmin):
    list_display = [
        "prefix",
        "user",
        "name",
        "scope_list",
        "status",
        "expires_at",
        "last_used_at",
        "created_at",
        "revoked_at",
    ]
    list_filter = ["revoked_at", "expires_at"]
    search_fields = ["prefix", "name", "user__username"]
    readonly_fields = [
        "prefix",
        "user",
        "name",
        "scope_list",
        "status",
        "expires_at",
        "created_at",
        "last_used_at",
        "revoked_at",
        "revoked_by",
    ]
    fields = readonly_fields
    actions = ["revoke"]

    @admin.display(description="scopes")
    def scope_list(self, token: ApiToken) -> str:
        return ", ".join(token.scopes)

    @admin.display(description="status")
    def status(self, token: ApiToken) -> str:
        return token.status

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False  # tokens are made by `manage.py create_api_token`, which shows them once

    def has_change_permission(self, request: HttpRequest, obj: object = None) -> bool:
        return False  # a token is revoked (the action below), never edited

    def has_delete_permission(self, request: HttpRequest, obj: object = None) -> bool:
        return False  # revoking keeps the row, so the trail's TOKEN_* events still name it

    def has_revoke_permission(self, request: HttpRequest) -> bool:
        return request.user.has_perm("approvals.change_apitoken")

    @admin.action(description="Revoke the selected tokens", permissions=["revoke"])
    def revoke(self, request: HttpRequest, queryset: QuerySet) -> None:
        done = sum(
            tokens.revoke(t, actor=request.user, via="admin")
            for t in queryset.select_related("user")
        )
        self.message_user(request, f"Revoked {done} token(s).", messages.SUCCESS)


@admin.register(Passkey)
class PasskeyAdmin(admin.ModelAdmin):
    """Reviewers' passkeys, read only: a reviewer adds and removes their own on the account
    page, where each change is audited (access.passkeys); the key itself is never shown."""

    list_display = ["name", "user", "created_at", "last_used_at", "sign_count"]
    list_filter = ["user"]
    fields = ["user", "name", "credential_id", "sign_count", "created_at", "last_used_at"]
    readonly_fields = fields

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj: object = None) -> bool:
        return False

    def has_delete_permission(self, request: HttpRequest, obj: object = None) -> bool:
        return False
