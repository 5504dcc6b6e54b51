"""Web Push: the installable app's files at the site's root, and the Account page's devices."""

from django.urls import path

from webpush import views

urlpatterns = [
    path("sw.js", views.service_worker, name="service_worker"),
    path("manifest.webmanifest", views.manifest, name="manifest"),
    path("account/devices", views.add_device, name="device_add"),
    path("account/devices/<int:device_id>/remove", views.remove_device, name="device_remove"),
]
