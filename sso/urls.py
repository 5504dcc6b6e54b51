"""Signing in and out: the login page, the way to the identity provider and back, sign-out."""

from django.urls import path

from sso import views

urlpatterns = [
    path("login/", views.LoginView.as_view(), name="login"),
    path("logout/", views.sign_out, name="logout"),
    path("sso/start", views.start, name="sso_start"),
    path("sso/callback", views.callback, name="sso_callback"),
]
