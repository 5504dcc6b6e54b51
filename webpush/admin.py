"""Web Push in the admin: the devices and the pushes made (viewed only: a device is removed
from its owner's Account page or when its push service says it is gone, both audited)."""

from django.contrib import admin

from agents.admin import ViewOnly
from webpush.models import Device, Push


@admin.register(Device)
class DeviceAdmin(ViewOnly, admin.ModelAdmin):
    list_display = ["user", "name", "created_at", "last_push_at"]
    search_fields = ["user__username", "name"]
    exclude = ["endpoint", "p256dh", "auth"]  # the subscription's capability and keys


@admin.register(Push)
class PushAdmin(ViewOnly, admin.ModelAdmin):
    list_display = ["created_at", "kind", "device", "status", "attempts", "finished_at"]
    list_filter = ["kind", "status"]
    search_fields = ["key", "device__user__username"]
