"""Keyset pages of the API's lists: ?limit=, and a ?cursor= the `next` link carries."""

import base64
import binascii
from datetime import datetime
from typing import Any

from django.db.models import Q
from django.http import HttpRequest

from approvals.http import BadRequest, parse_uuid, whole_number

PAGE_SIZE = 50
MAX_PAGE_SIZE = 200


def encode_cursor(s: Any) -> str:
    return base64.urlsafe_b64encode(f"{s.created_at.isoformat()}|{s.id}".encode()).decode()


def decode_cursor(cursor: str) -> tuple[datetime, Any]:
    try:
        created, pk = base64.urlsafe_b64decode(cursor.encode()).decode().split("|")
        parsed = datetime.fromisoformat(created)
    except (ValueError, binascii.Error, UnicodeDecodeError) as e:
        raise BadRequest(
            "The cursor is not valid.", {"cursor": "Use the 'next' link as given."}
        ) from e
    if parse_uuid(pk) is None:
        raise BadRequest("The cursor is not valid.", {"cursor": "Use the 'next' link as given."})
    return parsed, pk


def keyset_page(
    request: HttpRequest, rows: Any, newest_first: bool
) -> tuple[list[Any], str | None]:
    """One page of `rows` in (created_at, id) order, newest or oldest first: those after the
    request's ?cursor=, at most ?limit= of them, and the `next` link (None on the last page).
    A keyset, not an offset, so a page never repeats or skips a row made meanwhile. Raises
    BadRequest for a bad limit or cursor."""
    limit = page_limit(request)
    beyond = "lt" if newest_first else "gt"
    if request.GET.get("cursor"):
        created, pk = decode_cursor(request.GET["cursor"])
        rows = rows.filter(
            Q(**{f"created_at__{beyond}": created}) | Q(created_at=created, **{f"id__{beyond}": pk})
        )
    order = ("-created_at", "-id") if newest_first else ("created_at", "id")
    page = list(rows.order_by(*order)[: limit + 1])
    if len(page) <= limit:
        return page, None
    page = page[:limit]
    params = request.GET.copy()
    params["cursor"] = encode_cursor(page[-1])
    return page, f"{request.path}?{params.urlencode()}"


def page_limit(request: HttpRequest) -> int:
    limit = whole_number(request.GET.get("limit", str(PAGE_SIZE)))
    if limit is None or not 1 <= limit <= MAX_PAGE_SIZE:
        raise BadRequest("Bad limit.", {"limit": f"A whole number from 1 to {MAX_PAGE_SIZE}."})
    return limit
