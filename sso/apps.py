"""Sign-in with OpenID Connect (docs/sso.md)."""

from django.apps import AppConfig


class SsoConfig(AppConfig):
    name = "sso"
    verbose_name = "Single sign-on"
    default_auto_field = "django.db.models.BigAutoField"
