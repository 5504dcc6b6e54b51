from django.contrib import admin

from demo.models import DemoAction


@admin.register(DemoAction)
class DemoActionAdmin(admin.ModelAdmin):
    list_display = ["id", "tool", "summary", "thread", "created_at"]
