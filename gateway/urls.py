"""URLs: the JSON API, the admin, and the reviewer pages."""

from django.contrib import admin
from django.urls import include, path

from approvals import api

api_patterns = [
    path("threads", api.threads),
    path("threads/<str:thread_id>", api.thread_detail),
    path("threads/<str:thread_id>/messages", api.thread_messages),
    path("threads/<str:thread_id>/cancel", api.thread_cancel),
    path("threads/<str:thread_id>/suspensions/<str:suspension_id>/resume", api.resume),
    path("suspensions", api.suspensions),
    path("suspensions/<str:suspension_id>", api.suspension_detail),
    path("events", api.event_list),
]

urlpatterns = [
    path("api/", include(api_patterns)),
    path("admin/", admin.site.urls),
    path("", include("approvals.urls")),
]

handler404 = "approvals.views.not_found"
handler500 = "approvals.http.server_error"
