"""Login throttling: django-axes' check, for the logins that come with a request."""

from typing import Any

from axes.backends import AxesStandaloneBackend
from django.http import HttpRequest


class LoginThrottleBackend(AxesStandaloneBackend):
    """Refuses a login from a username and address that failed AXES_FAILURE_LIMIT times.

    Every login form (/login/, /admin/login/) passes its request; a call without one is not a
    login over the network (a test client's login(), a shell), has no address to count by, and
    is left to the next backend instead of failing as django-axes does by default."""

    def authenticate(
        self,
        request: HttpRequest | None,
        username: str | None = None,
        password: str | None = None,
        **kwargs: Any,
    ) -> None:
        if request is None:
            return None
        return super().authenticate(request, username, password, **kwargs)
