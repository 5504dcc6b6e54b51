"""The sign-in pages: the login page (the provider's button, and the password form unless
passwords are off), the way to the provider and back, and sign-out, which ends the gateway
session and then the provider's where its discovery document offers an end-session endpoint.
Every way a provider's answer can fail ends on a page that says why (sso.refusals)."""

import logging
from typing import Any

from django.conf import settings
from django.contrib import auth
from django.contrib.auth import views as auth_views
from django.http import Http404, HttpRequest, HttpResponse, HttpResponseRedirect
from django.shortcuts import render
from django.utils.http import url_has_allowed_host_and_scheme
from django.views.decorators.cache import never_cache
from django.views.decorators.http import require_GET, require_POST

from sso import accounts, claims, passwords, provider, refusals

log = logging.getLogger(__name__)

# Where the person goes after signing in, kept in the session across the provider's pages;
# the ID token, kept as the end-session request's hint.
NEXT_KEY = "sso_next"
ID_TOKEN_KEY = "sso_id_token"
# The backend the session names: the one that reads a user's permissions (access.permbackend).
BACKEND = "access.permbackend.OneQueryModelBackend"


class LoginView(auth_views.LoginView):
    """/login/: the provider's button when OpenID Connect is set up; the password form, shown
    folded away for the break-glass administrators when passwords are off."""

    template_name = "sso/login.html"
    form_class = passwords.LoginForm
    redirect_authenticated_user = True

    def get_context_data(self, **kwargs: Any) -> dict[str, Any]:
        context: dict[str, Any] = super().get_context_data(**kwargs)
        context.update(
            sso=provider.configured(),
            provider_name=settings.OIDC_PROVIDER_NAME,
            passwords_off=settings.OIDC_ONLY,
        )
        return context


def _next(request: HttpRequest, wanted: str | None) -> str:
    """Where to go after signing in: `wanted` when it is a page of this site, else the inbox."""
    if wanted and url_has_allowed_host_and_scheme(
        wanted, allowed_hosts={request.get_host()}, require_https=request.is_secure()
    ):
        return wanted
    return settings.LOGIN_REDIRECT_URL


def refused(request: HttpRequest, refusal: refusals.Refusal) -> HttpResponse:
    return render(
        request,
        "sso/refused.html",
        {"refusal": refusal, "provider_name": settings.OIDC_PROVIDER_NAME},
        status=refusal.status,
    )


@never_cache
@require_GET
def start(request: HttpRequest) -> HttpResponse:
    """/sso/start: off to the provider, with where to come back to kept in the session."""
    if not provider.configured():
        raise Http404
    request.session[NEXT_KEY] = _next(request, request.GET.get("next"))
    try:
        return provider.send_to_provider(request)
    except refusals.REFUSED as e:
        return refused(request, refusals.explain(e))


@never_cache
@require_GET
def callback(request: HttpRequest) -> HttpResponse:
    """/sso/callback: the provider's answer checked, its ID token verified, the person signed
    in as their gateway user (made or brought up to date, sso.accounts)."""
    if not provider.configured():
        raise Http404
    try:
        answer = provider.come_back(request)
        user = accounts.sign_in(claims.person(answer.claims))
    except refusals.REFUSED as e:
        return refused(request, refusals.explain(e))
    going = _next(request, request.session.pop(NEXT_KEY, None))
    auth.login(request, user, backend=BACKEND)
    request.session[ID_TOKEN_KEY] = answer.id_token
    return HttpResponseRedirect(going)


@require_POST
def sign_out(request: HttpRequest) -> HttpResponse:
    """/logout/: the gateway session ended (its sockets and streams with it, access.revocation),
    then, for a person who signed in through the provider, the provider's session too."""
    id_token = request.session.get(ID_TOKEN_KEY)
    auth.logout(request)
    if isinstance(id_token, str) and provider.configured():
        try:
            url = provider.end_session_url(id_token)
        except refusals.REFUSED as e:
            # Signed out here all the same; the provider's session outlives it.
            log.warning("OpenID Connect: no end-session address (%s): %s", type(e).__name__, e)
            url = None
        if url:
            return HttpResponseRedirect(url)
    return HttpResponseRedirect(settings.LOGOUT_REDIRECT_URL)
