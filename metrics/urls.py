"""The metrics' URLs: /metrics (Prometheus), /api/metrics/conversations and
/api/metrics/tiers, /insights/."""

from django.urls import path

from metrics import tier_api, views

urlpatterns = [
    path("metrics", views.prometheus, name="prometheus"),
    path("api/metrics/conversations", views.conversations, name="metrics_conversations"),
    path("api/metrics/tiers", tier_api.tier_metrics, name="metrics_tiers"),
    path("insights/", views.insights, name="insights"),
]
