"""The reviewer pages."""

from django.contrib.auth import views as auth_views
from django.urls import path

from approvals import audit, inbox, views

urlpatterns = [
    path("", inbox.inbox, name="inbox"),
    path("threads/<str:thread_id>/", views.thread_page, name="thread"),
    path("runs/new/", views.new_run, name="new_run"),
    path("audit/", audit.audit_page, name="audit"),
    path("audit/export.csv", audit.export_csv, name="audit_csv"),
    path("audit/export.jsonl", audit.export_jsonl, name="audit_jsonl"),
    path("audit/events.csv", audit.trail_csv, name="audit_events_csv"),
    path("audit/events.jsonl", audit.trail_jsonl, name="audit_events_jsonl"),
    path("healthz", views.health, name="health"),
    path(
        "login/",
        auth_views.LoginView.as_view(
            template_name="approvals/login.html", redirect_authenticated_user=True
        ),
        name="login",
    ),
    path("logout/", auth_views.LogoutView.as_view(), name="logout"),
]
