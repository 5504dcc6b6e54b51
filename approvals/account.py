"""The account page (/account/): a reviewer's passkeys, registered and removed there
(access.passkeys), which approve the requests whose policy asks for a step-up. Its
Notifications section, the devices that get requests, is webpush's (its template tag
`device_notifications`, loaded by the page's template)."""

from django.contrib.auth.decorators import login_required
from django.core.exceptions import PermissionDenied
from django.http import HttpRequest, HttpResponse, JsonResponse
from django.shortcuts import redirect, render
from django.views.decorators.http import require_POST

from access import passkeys
from approvals.http import BadRequest, bad_request, json_body
from approvals.stepup import reviewer_page
from infra.answers import error


@login_required
def account_page(request: HttpRequest) -> HttpResponse:
    """The reviewer's passkeys, with a button to add one (static/js/passkeys.js)."""
    if not request.user.has_perm("agents.decide_suspension"):
        raise PermissionDenied
    return render(
        request,
        "approvals/account.html",
        {
            "passkeys": list(request.user.passkeys.all()),
            "said": {"added": "Passkey added.", "removed": "Passkey removed."}.get(
                request.GET.get("done", "")
            ),
            "nav": "account",
        },
    )


@reviewer_page
def registration_options(request: HttpRequest) -> HttpResponse:
    """The options of navigator.credentials.create, their challenge kept in the session."""
    found = passkeys.registration_options(request.user, request.session)
    return HttpResponse(found, content_type="application/json")


@reviewer_page
def register(request: HttpRequest) -> HttpResponse:
    """{"name", "credential"}: the browser's answer to the options, verified and kept."""
    try:
        data = json_body(request)
    except BadRequest as e:
        return bad_request(e)
    credential, name = data.get("credential"), data.get("name")
    if not isinstance(credential, dict) or not isinstance(name, (str, type(None))):
        fields = {"credential": "The browser's PublicKeyCredential.", "name": "A short name."}
        return bad_request(BadRequest("Send the passkey's name and credential.", fields))
    try:
        made = passkeys.register(request.user, request.session, credential, name or "")
    except passkeys.Refused as e:
        return error(400, "passkey_refused", e.detail)
    return JsonResponse({"id": made.pk, "name": made.name}, status=201)


@login_required
@require_POST
def remove(request: HttpRequest, passkey_id: int) -> HttpResponse:
    """Remove one of the reviewer's passkeys (a form's POST, CSRF-checked)."""
    passkeys.remove(request.user, passkey_id)
    return redirect("/account/?done=removed")
