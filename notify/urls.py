"""The notify pages."""

from django.urls import path

from notify import views

urlpatterns = [path("", views.preferences, name="email_preferences")]
