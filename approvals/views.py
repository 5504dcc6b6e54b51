"""Pages for people: login, health, and JSON-aware error pages."""

from django.http import HttpRequest, HttpResponse, JsonResponse
from django.shortcuts import redirect

from approvals.http import error


def not_found(request: HttpRequest, exception: Exception | None = None) -> HttpResponse:
    if request.path.startswith("/api/"):
        return error(404, "not_found", "No such resource.")
    return HttpResponse("<!doctype html><title>Not found</title><h1>Not found</h1>", status=404)


def health(request: HttpRequest) -> JsonResponse:
    return JsonResponse({"ok": True})


def home(request: HttpRequest) -> HttpResponse:
    return redirect("/admin/")
