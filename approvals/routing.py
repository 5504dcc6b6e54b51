"""WebSocket routes."""

from django.urls import path

from approvals.consumers import EventConsumer

websocket_urlpatterns = [path("ws/events/", EventConsumer.as_asgi())]
