"""The installable app's files (/manifest.webmanifest, the service worker /sw.js) and the
Account page's device endpoints: a subscription added, a device removed."""

from functools import lru_cache

from django.contrib.auth.decorators import login_required
from django.contrib.staticfiles import finders
from django.http import HttpRequest, HttpResponse, JsonResponse
from django.shortcuts import redirect
from django.templatetags.static import static
from django.views.decorators.http import require_GET, require_POST

from approvals.http import BadRequest, bad_request, json_body, reviewer_post
from infra.answers import error
from webpush import devices

THEME = "#1f5fbf"  # static/favicon.svg's blue


@lru_cache(maxsize=1)
def _worker_source() -> bytes:
    found = finders.find("js/sw.js")
    with open(str(found), "rb") as f:
        return f.read()


@require_GET
def service_worker(request: HttpRequest) -> HttpResponse:
    """The service worker (static/js/sw.js), served at the site's root so that its scope is
    the whole site; like a static file, anyone may fetch it. Not cached: a browser checks
    for a new one at each registration."""
    response = HttpResponse(_worker_source(), content_type="text/javascript; charset=utf-8")
    response["Service-Worker-Allowed"] = "/"
    response["Cache-Control"] = "no-cache"
    return response


@require_GET
def manifest(request: HttpRequest) -> HttpResponse:
    """The web app manifest: what a phone needs to install the pages as an app. Public, as
    the icons it names are."""
    icons = [
        {"src": static(f"icons/icon-{size}.png"), "sizes": f"{size}x{size}", "type": "image/png"}
        for size in (192, 512)
    ]
    # Full bleed, its mark inside the safe zone: a phone crops it to its own shape.
    icons.append({**icons[-1], "src": static("icons/icon-maskable-512.png"), "purpose": "maskable"})
    body = {
        "name": "Approval gateway",
        "short_name": "Approvals",
        "description": "Requests of AI agents waiting for a person's decision.",
        "id": "/",
        "start_url": "/",
        "scope": "/",
        "display": "standalone",
        "background_color": "#ffffff",
        "theme_color": THEME,
        "icons": icons,
    }
    return JsonResponse(body, content_type="application/manifest+json")


# The devices' JSON endpoints on the Account page.
reviewer_endpoint = reviewer_post("turn notifications on")


@reviewer_endpoint
def add_device(request: HttpRequest) -> HttpResponse:
    """{"subscription": PushSubscription.toJSON(), "name"}: this browser's push subscription,
    kept for the reviewer."""
    try:
        data = json_body(request)
    except BadRequest as e:
        return bad_request(e)
    name = data.get("name")
    if not isinstance(name, (str, type(None))):
        return bad_request(BadRequest("Send a short name.", {"name": "A short name."}))
    typed = name or devices.guess_name(request.headers.get("User-Agent", "")[:500])
    try:
        device = devices.add(request.user, data.get("subscription"), typed)
    except devices.Refused as e:
        return error(400, "subscription_refused", e.detail)
    return JsonResponse({"id": device.pk, "name": device.name}, status=201)


@login_required
@require_POST
def remove_device(request: HttpRequest, device_id: int) -> HttpResponse:
    """Remove one of the reviewer's devices (a form's POST, CSRF-checked)."""
    devices.remove(request.user, device_id)
    return redirect("/account/?devices=removed")
