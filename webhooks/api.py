"""/api/webhooks: subscriptions, their delivery log and replays, for staff only."""

from collections.abc import Callable
from datetime import UTC, datetime
from functools import wraps
from typing import Any

from django.http import HttpRequest, HttpResponse, JsonResponse
from django.utils import timezone
from django.utils.dateparse import parse_datetime

from access.auth import api
from access.models import Scope
from approvals.http import BadRequest, error, json_body, parse_uuid, row_id, whole_number
from approvals.openapi import operation
from webhooks import actions
from webhooks import schemas as shapes
from webhooks.models import Delivery, Subscription

PAGE_SIZE = 50
MAX_PAGE_SIZE = 200
MAX_REPLAY = 10_000
# Past any real list; offset + limit must still fit the database's integers.
MAX_OFFSET = 2**62


def staff_api(perms: dict[str, str]) -> Callable:
    """An API view for staff: each method needs its permission (a superuser has them all)."""

    def decorate(view: Callable) -> Callable:
        @api(list(perms), scope=Scope.ADMIN)
        @wraps(view)
        def wrapper(request: HttpRequest, *args: Any, **kwargs: Any) -> HttpResponse:
            if not request.user.is_staff:
                return error(403, "forbidden", "Webhooks are managed by staff.")
            if not request.user.has_perm(perms[request.method]):
                return error(403, "forbidden", "You do not have permission to do this.")
            return view(request, *args, **kwargs)

        return wrapper

    return decorate


def subscription_payload(s: Subscription, with_secret: bool = False) -> dict[str, Any]:
    body = {
        "id": str(s.id),
        "url": s.url,
        "event_types": list(s.event_types),
        "agent": s.agent or None,
        "description": s.description,
        "enabled": s.enabled,
        "disabled_reason": s.disabled_reason or None,
        "owner": s.owner.username if s.owner else None,
        "created_at": s.created_at.isoformat(),
        "updated_at": s.updated_at.isoformat(),
    }
    if with_secret:
        body["secret"] = s.secret
    return body


def _iso(value: datetime | None) -> str | None:
    return value.isoformat() if value else None


def delivery_payload(d: Delivery, with_attempts: bool = False) -> dict[str, Any]:
    body = {
        "id": d.id,
        "webhook_id": d.webhook_id,
        "event": d.event_id,
        "subscription": str(d.subscription_id) if d.subscription_id else None,
        "push_config": str(d.push_config_id) if d.push_config_id else None,
        "status": d.status,
        "attempts": d.attempts,
        "next_attempt_at": _iso(d.next_attempt_at) if d.status == "pending" else None,
        "last_status_code": d.last_status_code,
        "last_response_ms": d.last_response_ms,
        "last_error": d.last_error or None,
        "finished_at": _iso(d.finished_at),
        "created_at": d.created_at.isoformat(),
    }
    if with_attempts:
        body["attempt_log"] = [
            {
                "number": a.number,
                "started_at": a.started_at.isoformat(),
                "succeeded": a.succeeded,
                "status_code": a.status_code,
                "response_ms": a.response_ms,
                "error": a.error or None,
            }
            for a in d.attempt_log.all()
        ]
    return body


def _bad(e: BadRequest) -> JsonResponse:
    return error(e.status, e.code, e.detail, e.fields)


def _subscription(subscription_id: str) -> Subscription | None:
    pk = parse_uuid(subscription_id)
    return Subscription.objects.select_related("owner").filter(pk=pk).first() if pk else None


def _checked(data: dict[str, Any], required: tuple[str, ...] = ()) -> dict[str, Any]:
    fields = {k: "Unknown field." for k in set(data) - set(actions.EDITABLE)}
    fields.update({k: "Required." for k in required if k not in data})
    fields.update(actions.field_errors({k: v for k, v in data.items() if k not in fields}))
    if fields:
        raise BadRequest("The subscription is not valid.", fields)
    return data


@operation(
    "GET",
    "List webhook subscriptions",
    query=shapes.SubscriptionQuery,
    responses={200: shapes.SubscriptionPage},
    description="Staff only. Oldest first; follow `next`.",
)
@operation(
    "POST",
    "Subscribe a webhook",
    body=shapes.NewSubscription,
    responses={201: shapes.Subscription},
    description="Staff only. Answers with the signing secret.",
)
@staff_api({"GET": "webhooks.view_subscription", "POST": "webhooks.add_subscription"})
def subscriptions(request: HttpRequest) -> JsonResponse:
    if request.method == "GET":
        try:
            limit = _limit(request)
            offset = row_id(request.GET.get("offset", "0"))
            if offset is None or offset > MAX_OFFSET:
                raise BadRequest("Bad offset.", {"offset": f"A whole number up to {MAX_OFFSET}."})
        except BadRequest as e:
            return _bad(e)
        rows = Subscription.objects.select_related("owner").order_by("created_at", "id")
        page = list(rows[offset : offset + limit + 1])
        next_url = None
        if len(page) > limit:
            page = page[:limit]
            params = request.GET.copy()
            params["offset"] = str(offset + limit)
            next_url = f"{request.path}?{params.urlencode()}"
        return JsonResponse({"results": [subscription_payload(s) for s in page], "next": next_url})
    try:
        data = _checked(json_body(request), required=("url",))
    except BadRequest as e:
        return _bad(e)
    s = actions.create_subscription(request.user, data)
    # The secret is shown to staff here and on the subscription's page, nowhere else.
    return JsonResponse(subscription_payload(s, with_secret=True), status=201)


@operation("GET", "One webhook subscription", responses={200: shapes.Subscription})
@operation(
    "PATCH",
    "Change a subscription",
    body=shapes.SubscriptionChange,
    responses={200: shapes.Subscription},
)
@operation("DELETE", "Delete a subscription", responses={204: None})
@staff_api(
    {
        "GET": "webhooks.view_subscription",
        "PATCH": "webhooks.change_subscription",
        "DELETE": "webhooks.delete_subscription",
    }
)
def subscription_detail(request: HttpRequest, subscription_id: str) -> HttpResponse:
    s = _subscription(subscription_id)
    if s is None:
        return error(404, "not_found", "No such subscription.")
    if request.method == "GET":
        return JsonResponse(subscription_payload(s, with_secret=True))
    if request.method == "DELETE":
        actions.delete_subscription(s.pk, request.user)
        return HttpResponse(status=204)
    try:
        data = _checked(json_body(request))
    except BadRequest as e:
        return _bad(e)
    s = actions.update_subscription(s.pk, request.user, data)
    if s is None:
        return error(404, "not_found", "No such subscription.")
    return JsonResponse(subscription_payload(s, with_secret="secret" in data))


def _limit(request: HttpRequest) -> int:
    limit = whole_number(request.GET.get("limit", str(PAGE_SIZE)))
    if limit is None or not 1 <= limit <= MAX_PAGE_SIZE:
        raise BadRequest("Bad limit.", {"limit": f"A whole number from 1 to {MAX_PAGE_SIZE}."})
    return limit


@operation(
    "GET",
    "A subscription's delivery log",
    query=shapes.DeliveryQuery,
    responses={200: shapes.DeliveryPage},
)
@staff_api({"GET": "webhooks.view_delivery"})
def subscription_deliveries(request: HttpRequest, subscription_id: str) -> JsonResponse:
    """The delivery log, newest first, a page at a time (`next` carries the cursor)."""
    s = _subscription(subscription_id)
    if s is None:
        return error(404, "not_found", "No such subscription.")
    q = request.GET
    rows = Delivery.objects.filter(subscription=s).prefetch_related("attempt_log")
    try:
        if q.get("status"):
            if q["status"] not in Delivery.Status.values:
                raise BadRequest(
                    "Unknown status.", {"status": f"One of {', '.join(Delivery.Status.values)}."}
                )
            rows = rows.filter(status=q["status"])
        if q.get("before"):
            before = row_id(q["before"])
            if before is None:
                raise BadRequest("Bad cursor.", {"before": "A delivery id."})
            rows = rows.filter(id__lt=before)
        limit = _limit(request)
    except BadRequest as e:
        return _bad(e)
    page = list(rows.order_by("-id")[: limit + 1])
    next_url = None
    if len(page) > limit:
        page = page[:limit]
        params = q.copy()
        params["before"] = str(page[-1].id)
        next_url = f"{request.path}?{params.urlencode()}"
    return JsonResponse(
        {"results": [delivery_payload(d, with_attempts=True) for d in page], "next": next_url}
    )


def _when(data: dict[str, Any], key: str, default: datetime | None) -> datetime:
    value = data.get(key)
    if value is None and default is not None:
        return default
    parsed = parse_datetime(value) if isinstance(value, str) else None
    if parsed is None:
        raise BadRequest("Bad time.", {key: "An ISO 8601 date and time."})
    return parsed if timezone.is_aware(parsed) else parsed.replace(tzinfo=UTC)


@operation(
    "POST",
    "Replay a time range's deliveries",
    body=shapes.Replay,
    responses={202: shapes.Replayed},
    errors=(409,),
)
@staff_api({"POST": "webhooks.change_delivery"})
def subscription_replay(request: HttpRequest, subscription_id: str) -> JsonResponse:
    """Replay the deliveries made in a time range: {"since", "until"?, "status"?: [...]}
    (status defaults to ["failed"]: the dead letters)."""
    s = _subscription(subscription_id)
    if s is None:
        return error(404, "not_found", "No such subscription.")
    try:
        data = json_body(request)
        unknown = set(data) - {"since", "until", "status"}
        if unknown:
            raise BadRequest("Unknown fields.", {k: "Unknown field." for k in unknown})
        since = _when(data, "since", None)
        until = _when(data, "until", timezone.now())
        statuses = data.get("status", [Delivery.Status.FAILED])
        if (
            not isinstance(statuses, list)
            or not statuses
            or not set(statuses) <= set(Delivery.Status.values)
        ):
            raise BadRequest(
                "Bad status.", {"status": f"A list of {', '.join(Delivery.Status.values)}."}
            )
        if since >= until:
            raise BadRequest("Empty range.", {"until": "After since."})
    except BadRequest as e:
        return _bad(e)
    if not s.enabled:
        return error(409, "disabled", "The subscription is disabled; enable it first.")
    rows = actions.deliveries_between(s, since, until, statuses)
    ids = list(rows.values_list("id", flat=True)[: MAX_REPLAY + 1])
    if len(ids) > MAX_REPLAY:
        return error(400, "too_many", f"More than {MAX_REPLAY} deliveries; replay a shorter range.")
    n = actions.replay(ids, request.user, since=since, until=until)
    return JsonResponse({"replayed": n}, status=202)


def _delivery(delivery_id: str) -> Delivery | None:
    pk = row_id(delivery_id)
    if pk is None:
        return None
    return Delivery.objects.select_related("subscription").filter(pk=pk).first()


@operation("GET", "One delivery with its attempts", responses={200: shapes.Delivery})
@staff_api({"GET": "webhooks.view_delivery"})
def delivery_detail(request: HttpRequest, delivery_id: str) -> JsonResponse:
    d = _delivery(delivery_id)
    if d is None:
        return error(404, "not_found", "No such delivery.")
    return JsonResponse(delivery_payload(d, with_attempts=True))


@operation("POST", "Send a delivery again", responses={202: shapes.Delivery}, errors=(409,))
@staff_api({"POST": "webhooks.change_delivery"})
def delivery_replay(request: HttpRequest, delivery_id: str) -> JsonResponse:
    """Send one delivery again now, with its webhook-id."""
    d = _delivery(delivery_id)
    if d is None:
        return error(404, "not_found", "No such delivery.")
    if d.subscription is not None and not d.subscription.enabled:
        return error(409, "disabled", "The subscription is disabled; enable it first.")
    actions.replay([d.pk], request.user)
    d.refresh_from_db()
    return JsonResponse(delivery_payload(d), status=202)
