"""Webhooks in the admin: subscriptions are edited here (audited like the API's changes); the
delivery log is read here, and deliveries replayed, one or a filtered range at a time."""

from typing import Any

from django import forms
from django.contrib import admin, messages
from django.db.models import QuerySet
from django.http import HttpRequest
from django.utils.html import format_html_join

from webhooks import actions
from webhooks.models import Attempt, Delivery, Subscription


class SubscriptionForm(forms.ModelForm):
    url = forms.URLField(max_length=2000, assume_scheme="https")
    event_types = forms.MultipleChoiceField(
        choices=[],
        required=False,
        widget=forms.CheckboxSelectMultiple,
        help_text="None ticked: every type.",
    )
    secret = forms.CharField(
        required=False,
        max_length=200,
        help_text="Standard Webhooks secret (whsec_…). Leave empty to have one made.",
    )

    class Meta:
        model = Subscription
        fields = ["url", "description", "event_types", "agent", "enabled", "secret"]

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.fields["event_types"].choices = [(t, t) for t in actions.known_event_types()]

    def clean(self) -> dict[str, Any]:
        data = super().clean()
        values = {k: data[k] for k in ("url", "secret", "agent") if data.get(k) is not None}
        values["event_types"] = list(data.get("event_types") or [])
        for field, message in actions.field_errors(values).items():
            self.add_error(field, message)
        return data


@admin.register(Subscription)
class SubscriptionAdmin(admin.ModelAdmin):
    form = SubscriptionForm
    list_display = ["url", "enabled", "types", "agent", "owner", "created_at"]
    list_filter = ["enabled"]
    search_fields = ["url", "description", "agent"]
    readonly_fields = ["owner", "disabled_reason", "created_at", "updated_at"]

    @admin.display(description="event types")
    def types(self, obj: Subscription) -> str:
        return ", ".join(obj.event_types) or "all"

    def save_model(self, request: HttpRequest, obj: Subscription, form: Any, change: bool) -> None:
        # Through the actions, so the change writes its Event like the API's does.
        values = {k: form.cleaned_data.get(k) for k in SubscriptionForm.Meta.fields}
        values["event_types"] = list(values["event_types"] or [])
        values["agent"] = values["agent"] or ""
        values["description"] = values["description"] or ""
        values["secret"] = values["secret"] or ""
        if change:
            saved = actions.update_subscription(obj.pk, request.user, values)
        else:
            saved = actions.create_subscription(request.user, values)
        obj.pk = saved.pk if saved is not None else obj.pk

    def delete_model(self, request: HttpRequest, obj: Subscription) -> None:
        actions.delete_subscription(obj.pk, request.user)

    def delete_queryset(self, request: HttpRequest, queryset: QuerySet[Subscription]) -> None:
        for pk in list(queryset.values_list("pk", flat=True)):
            actions.delete_subscription(pk, request.user)


class AttemptInline(admin.TabularInline):
    model = Attempt
    fields = [
        "number",
        "started_at",
        "succeeded",
        "status_code",
        "response_ms",
        "error",
        "response_body",
    ]
    readonly_fields = fields
    extra = 0
    can_delete = False

    def has_add_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False


@admin.register(Delivery)
class DeliveryAdmin(admin.ModelAdmin):
    """The log: read only (attempts change it, not people), with the replay action. A time
    range is replayed by filtering by date (or the date bar) and selecting all."""

    list_display = [
        "id",
        "webhook_id",
        "receiver",
        "event_type",
        "status",
        "attempts",
        "last_status_code",
        "last_response_ms",
        "short_error",
        "next_attempt_at",
        "created_at",
    ]
    list_filter = ["status", "created_at", "subscription"]
    date_hierarchy = "created_at"
    search_fields = ["webhook_id"]
    list_select_related = ["event", "subscription", "push_config"]
    inlines = [AttemptInline]
    actions = ["replay"]
    fields = [
        "webhook_id",
        "event",
        "subscription",
        "push_config",
        "status",
        "attempts",
        "retries",
        "next_attempt_at",
        "last_status_code",
        "last_response_ms",
        "last_error",
        "finished_at",
        "created_at",
        "payload",
    ]
    readonly_fields = fields

    @admin.display(description="receiver")
    def receiver(self, obj: Delivery) -> str:
        return obj.receiver_url

    @admin.display(description="event")
    def event_type(self, obj: Delivery) -> str:
        return f"#{obj.event_id} {obj.event.type}"

    @admin.display(description="last error")
    def short_error(self, obj: Delivery) -> str:
        return obj.last_error[:80]

    @admin.display(description="event payload")
    def payload(self, obj: Delivery) -> str:
        message = obj.event.as_message()
        return format_html_join("\n", "<div>{}: {}</div>", sorted(message.items()))

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False

    def has_replay_permission(self, request: HttpRequest) -> bool:
        return request.user.has_perm("webhooks.change_delivery")

    @admin.action(
        description="Replay the selected deliveries (same webhook-id)", permissions=["replay"]
    )
    def replay(self, request: HttpRequest, queryset: QuerySet[Delivery]) -> None:
        n = actions.replay(queryset.values_list("pk", flat=True), request.user)
        self.message_user(request, f"{n} deliveries will be sent again.", messages.SUCCESS)
