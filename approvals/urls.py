"""The reviewer pages."""

from django.contrib.auth import views as auth_views
from django.urls import path

from approvals import views

urlpatterns = [
    path("", views.home, name="home"),
    path("healthz", views.health, name="health"),
    path("login/", auth_views.LoginView.as_view(template_name="approvals/login.html"), name="login"),
    path("logout/", auth_views.LogoutView.as_view(), name="logout"),
]
