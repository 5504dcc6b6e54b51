"""The identities, read only: which provider subject signs in as which user."""

from django.contrib import admin
from django.http import HttpRequest

from sso.models import Identity


@admin.register(Identity)
class IdentityAdmin(admin.ModelAdmin):
    list_display = ("user", "issuer", "subject", "email", "signed_in_at")
    list_select_related = ("user",)
    search_fields = ("user__username", "subject", "email")
    readonly_fields = ("user", "issuer", "subject", "email", "created_at", "signed_in_at")

    # Made and changed by signing in only (sso.accounts, audited); an administrator turns a
    # person away by deactivating their user.
    def has_add_permission(self, request: HttpRequest) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj: object = None) -> bool:
        return False

    def has_delete_permission(self, request: HttpRequest, obj: object = None) -> bool:
        return False
