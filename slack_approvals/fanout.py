"""Slack's fan-out: requests and their decisions, read from the Event table, become Slack
deliveries.

The cursor, the batch's transaction and the nudge are the shared fan-out's
(agents.delivery.fanout), as webhooks' are; runs come from `nudge` (after a commit that
recorded a request's event, agents.events.committed) and from beat's sweep
(slack_approvals.tasks.sweep), which catches whatever a nudge missed.

What makes a delivery: AGENT_SUSPENDED of a request whose agent has a route (SlackRoute) posts
one message to the route's channel and one to each linked person its `dm` names; a decision,
vote, deadline, extension or cancellation of a request that was posted updates its messages;
a reminder or an escalation of it is a reply in each message's thread.
"""

import logging
from datetime import datetime
from typing import Any

from django.contrib.auth import get_user_model
from django.contrib.auth.models import Group
from django.db.models import Q

from agents.delivery.fanout import FanOut, Nudge
from agents.models import Event
from slack_approvals import client, outbox, routes
from slack_approvals.models import SlackCursor, SlackDelivery, SlackLink, SlackRoute

log = logging.getLogger(__name__)

POSTED = {Event.Type.AGENT_SUSPENDED}
UPDATED = {
    Event.Type.SUSPENSION_DECIDED,
    Event.Type.SUSPENSION_TIMEOUT,
    Event.Type.SUSPENSION_CANCELLED,
    Event.Type.SUSPENSION_VOTED,
    Event.Type.SUSPENSION_EXTENDED,  # the deadline the message states moved
}
REPLIED = {Event.Type.SUSPENSION_REMINDER, Event.Type.SUSPENSION_ESCALATED}

nudges = Nudge("slack_approvals.tasks.fan_out")


def nudge(events: list[Event] | None = None, **kwargs: Any) -> None:
    """After a commit: have a worker fan out shortly, when Slack is on and the commit recorded
    an event this app sends."""
    if not client.enabled():
        return
    sent = POSTED | UPDATED | REPLIED
    if events is not None and not any(e.type in sent for e in events):
        return
    nudges()


def linked_names(names: list[str]) -> list[str]:
    """The active users a route's `dm` names (users, or the members of groups) that have a
    linked Slack account; the rest are logged and skipped."""
    users = get_user_model().objects.filter(
        Q(username__in=names) | Q(groups__name__in=names), is_active=True
    )
    found = set(users.values_list("username", flat=True))
    known = found | set(Group.objects.filter(name__in=names).values_list("name", flat=True))
    unknown = sorted(set(names) - known)
    if unknown:
        log.info("Slack: no user or group is named %s; no direct message sent", unknown)
    linked = set(
        SlackLink.objects.filter(user__username__in=found).values_list("user__username", flat=True)
    )
    skipped = sorted(found - linked)
    if skipped:
        log.info("Slack: no linked Slack account for %s; no direct message sent", skipped)
    return sorted(linked)


def deliveries_for(
    rows: list[dict[str, Any]], now: datetime, token: str = ""
) -> list[SlackDelivery]:
    """The deliveries these events make (see the module's text). The calls an agent made
    together (a group) share one message: its first request is posted, and a change of any
    of them updates it (slack_approvals.group_message)."""
    asked = {r["suspension__agent_name"] for r in rows if r["type"] in POSTED}
    by_agent = {r.agent: r for r in SlackRoute.objects.filter(agent__in=asked)} if asked else {}
    touched = {r["suspension__group"] for r in rows if r["suspension_id"]}
    # A group is updated when it was posted: a POST delivery was made for one of its requests,
    # earlier or in this same batch.
    posted = set(
        SlackDelivery.objects.filter(
            suspension__group__in=touched, action=SlackDelivery.Action.POST
        ).values_list("suspension__group", flat=True)
    )
    made: list[SlackDelivery] = []
    updated: set[Any] = set()
    replied: set[tuple[Any, int]] = set()
    common = {"next_attempt_at": now}
    for r in rows:
        group = r["suspension__group"]
        if r["type"] in POSTED and r["suspension_id"]:
            route = by_agent.get(r["suspension__agent_name"])
            if route is None or group in posted:
                continue
            channel, dm = routes.places(route, r["suspension__tool_name"])
            places = [{"channel": channel}] if channel else []
            places += [{"dm_user": name} for name in linked_names(dm)]
            for place in places:
                made.append(
                    SlackDelivery(
                        event_id=r["id"],
                        suspension_id=r["suspension_id"],
                        action=SlackDelivery.Action.POST,
                        **place,
                        **common,
                    )
                )
            if places:
                posted.add(group)
        elif r["type"] in UPDATED and group in posted - updated:
            # One update per group and batch: it shows the requests as they are when sent
            # (a quorum's last vote and its decision are one update).
            updated.add(group)
            made.append(
                SlackDelivery(
                    event_id=r["id"],
                    suspension_id=r["suspension_id"],
                    action=SlackDelivery.Action.UPDATE,
                    **common,
                )
            )
        elif r["type"] in REPLIED and group in posted and (group, r["type"]) not in replied:
            # The calls of a group are reminded together: one reply for them.
            replied.add((group, r["type"]))
            made.append(
                SlackDelivery(
                    event_id=r["id"],
                    suspension_id=r["suspension_id"],
                    action=SlackDelivery.Action.REPLY,
                    **common,
                )
            )
    return made


fanning = FanOut(
    cursor=SlackCursor,
    model=SlackDelivery,
    fields=(
        "suspension_id",
        "suspension__agent_name",
        "suspension__tool_name",
        "suspension__group",
    ),
    make=deliveries_for,
    enqueue=outbox.enqueue,
)
fan_out = fanning.step
fan_out_all = fanning.all
