"""URLs: the JSON API, the admin, and the reviewer pages."""

from django.contrib import admin
from django.templatetags.static import static
from django.urls import include, path
from django.views.generic import RedirectView

from a2a_server.card import agent_card
from approvals import jwks, openapi
from approvals.api import (
    decisions,
    events,
    extend,
    external,
    grants,
    replies,
    suspensions,
    threads,
)
from gateway import readiness

api_patterns = [
    path("threads", threads.threads),
    path("threads/<str:thread_id>", threads.thread_detail),
    path("threads/<str:thread_id>/messages", replies.thread_messages),
    path("threads/<str:thread_id>/cancel", threads.thread_cancel),
    path("threads/<str:thread_id>/suspensions/<str:suspension_id>/resume", decisions.resume),
    path("threads/<str:thread_id>/suspensions/<str:suspension_id>/extend", extend.extend),
    path("suspensions", suspensions.suspensions),
    path("suspensions/<str:suspension_id>", suspensions.suspension_detail),
    path("decisions", decisions.decide_many),
    path("events", events.event_list),
    # Standing grants (agents.grants), made with an approval (resumeExecution's `grant`).
    path("grants", grants.grant_list),
    path("grants/<str:grant_id>/revoke", grants.grant_revoke),
    path("events/<str:event_id>", events.event_detail),
    # Outside agents' requests (approvals.api.external; a long poll: approvals.external_wait).
    path("requests", external.requests),
    path("requests/<str:request_id>", external.request_detail),
    # The OpenAPI document of every view here (approvals.openapi), and a page that shows it.
    path("openapi.json", openapi.document, name="openapi"),
    path("docs", openapi.docs, name="api_docs"),
]

urlpatterns = [
    # Readiness (the database, the broker, the channel layer, the sweeper); /healthz is liveness.
    path("readyz", readiness.ready, name="ready"),
    path("api/", include("webhooks.urls")),
    path("api/", include(api_patterns)),
    # A2A: the agent card; the JSON-RPC endpoint /a2a is served beside Django (gateway.asgi).
    path(".well-known/agent-card.json", agent_card, name="agent_card"),
    # The public keys of the decisions' signed receipts (agents.receipts).
    path(".well-known/jwks.json", jwks.jwks, name="jwks"),
    path("admin/", admin.site.urls),
    # Browsers ask for /favicon.ico on pages that name no icon (the admin's): the vendored one.
    path("favicon.ico", RedirectView.as_view(url=static("favicon.svg"), permanent=True)),
    # /metrics, /api/metrics/conversations and the metrics page /insights/.
    path("", include("metrics.urls")),
    path("email/", include("notify.urls")),
    path("slack/", include("slack_approvals.urls")),
    # The installable app (/manifest.webmanifest, /sw.js) and the Account page's devices.
    path("", include("webpush.urls")),
    # /login/, /logout/ and the OpenID Connect sign-in (/sso/start, /sso/callback).
    path("", include("sso.urls")),
    path("", include("approvals.urls")),
]

handler404 = "approvals.views.not_found"
handler500 = "approvals.http.server_error"
