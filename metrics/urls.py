"""The metrics' URLs: /metrics (Prometheus), /api/metrics/conversations, /insights/."""

from django.urls import path

from metrics import views

urlpatterns = [
    path("metrics", views.prometheus, name="prometheus"),
    path("api/metrics/conversations", views.conversations, name="metrics_conversations"),
    path("insights/", views.insights, name="insights"),
]
