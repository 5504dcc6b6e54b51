"""An outside agent's request feeds the same outward channels as any suspension: webhook
deliveries for its events, and the reminders of the agent definition whose policy applies."""

import json
from datetime import timedelta
from typing import Any

import pytest
from django.test import Client
from django.utils import timezone

from access.models import ApiToken
from agents import reminders
from agents.models import Event
from webhooks import fanout
from webhooks.models import Delivery, Subscription


def raise_request(user: Any, **over: Any) -> dict[str, Any]:
    raw = ApiToken.issue(user, "agent", ["runs"])[1]
    body = {
        "agent": "billing-bot",
        "run_id": "run-1",
        "tool": "pay",
        "arguments": {"amount": 5},
        "idempotency_key": "k1",
        **over,
    }
    r = Client(headers={"Authorization": f"Bearer {raw}"}).post(
        "/api/requests", json.dumps(body), content_type="application/json"
    )
    assert r.status_code == 201, r.content
    return r.json()


@pytest.mark.django_db(transaction=True)
def test_webhooks_receive_the_request_and_its_decision(users: dict[str, Any]) -> None:
    fanout.fan_out_all()  # the cursor starts after whatever is already there
    hook = Subscription.objects.create(
        url="http://127.0.0.1:9/", agent="billing-bot", owner=users["admin"]
    )
    made = raise_request(users["operator"])
    raw = ApiToken.issue(users["reviewer"], "reviewer", ["decide"])[1]
    r = Client(headers={"Authorization": f"Bearer {raw}"}).post(
        f"/api/threads/{made['thread']}/suspensions/{made['id']}/resume",
        json.dumps({"approved": True}),
        content_type="application/json",
    )
    assert r.status_code == 202, r.content
    fanout.fan_out_all()
    sent = Delivery.objects.filter(subscription=hook).select_related("event").order_by("id")
    assert [d.event.type for d in sent] == [
        "THREAD_STARTED",
        "AGENT_SUSPENDED",
        "SUSPENSION_DECIDED",
    ]


def test_the_named_definition_s_reminders_apply(users: dict[str, Any], load_agents: Any) -> None:
    load_agents(
        """
agents:
  - name: billing-bot
    model: scripted
    script: [{text: Nothing to do.}]
    reminders: [60]
"""
    )
    made = raise_request(users["operator"], timeout=120)
    assert made["ladder"]["reminders"] == [60]
    later = timezone.now() + timedelta(seconds=61)
    assert reminders.apply_ladder_steps(now=later) == 1
    assert Event.objects.filter(
        type=Event.Type.SUSPENSION_REMINDER, suspension_id=made["id"]
    ).exists()


def test_decided_requests_free_the_pending_cap(users: dict[str, Any], settings: Any) -> None:
    """An outside run stays `running` in the gateway; only its pending requests count against
    MAX_PENDING_PER_AGENT, not the run itself."""
    from agents import decisions
    from agents.models import Suspension

    settings.MAX_PENDING_PER_AGENT = 2
    first = raise_request(users["operator"], run_id="a", idempotency_key="1")
    raise_request(users["operator"], run_id="b", idempotency_key="2")
    raw = ApiToken.issue(users["operator"], "agent", ["runs"])[1]
    third = {**{"agent": "billing-bot", "tool": "pay"}, "run_id": "c", "idempotency_key": "3"}
    full = Client(headers={"Authorization": f"Bearer {raw}"}).post(
        "/api/requests", json.dumps(third), content_type="application/json"
    )
    assert full.status_code == 429 and full.json()["error"] == "too_many_pending"
    decisions.decide(Suspension.objects.get(pk=first["id"]), users["reviewer"], {"approved": True})
    raise_request(users["operator"], run_id="c", idempotency_key="3")
