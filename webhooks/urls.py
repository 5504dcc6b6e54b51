"""/api/webhooks/…, included under /api/ (gateway/urls.py)."""

from django.urls import path

from webhooks import api

urlpatterns = [
    path("webhooks", api.subscriptions),
    path("webhooks/deliveries/<str:delivery_id>", api.delivery_detail),
    path("webhooks/deliveries/<str:delivery_id>/replay", api.delivery_replay),
    path("webhooks/<str:subscription_id>", api.subscription_detail),
    path("webhooks/<str:subscription_id>/deliveries", api.subscription_deliveries),
    path("webhooks/<str:subscription_id>/replay", api.subscription_replay),
]
