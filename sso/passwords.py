"""Passwords turned off (OIDC_ONLY): every password sign-in is refused, the login form's and the
admin's alike, but for the break-glass administrators (OIDC_BREAK_GLASS), the way in when the
provider is down. The refusal is an authentication backend, before the one that checks
passwords, so no path that signs in with a password (django.contrib.auth.authenticate) is left
out; the login form says it in its own words first."""

from typing import Any

from django.conf import settings
from django.contrib.auth.forms import AuthenticationForm
from django.core.exceptions import PermissionDenied, ValidationError
from django.http import HttpRequest


def password_allowed(username: str | None) -> bool:
    """Whether this username may sign in with a password."""
    return not settings.OIDC_ONLY or (username or "") in settings.OIDC_BREAK_GLASS


class PasswordsOff:
    """With OIDC_ONLY, stops authenticate() for a password of anyone but a break-glass
    administrator (PermissionDenied ends the backends' round: the password is never
    checked); otherwise passes, signing no one in. Not a BaseBackend: without get_user and
    the permission methods, no session names it and no permission check asks it."""

    def authenticate(
        self,
        request: HttpRequest | None,
        username: str | None = None,
        password: str | None = None,
        **kwargs: Any,
    ) -> None:
        if password is not None and not password_allowed(username):
            raise PermissionDenied
        return None


class LoginForm(AuthenticationForm):
    """The login page's form: the gateway's words for a refusal, and passwords off said as
    such, before the password is checked."""

    error_messages = {
        **AuthenticationForm.error_messages,
        "invalid_login": "That username and password do not match. Try again.",
        "password_off": "Passwords are turned off here: sign in with %(provider)s.",
    }

    def clean(self) -> dict[str, Any]:
        if not password_allowed(self.cleaned_data.get("username")):
            raise ValidationError(
                self.error_messages["password_off"],
                code="password_off",
                params={"provider": settings.OIDC_PROVIDER_NAME},
            )
        cleaned: dict[str, Any] = super().clean()
        return cleaned
