"""Who hears of a request, and why: the routing that email (notify.outbox) and reviewers'
devices (webpush.fanout) share.

A new request reaches the deciders who opted in for its agent (the Email page); a reminder
reaches them too, and the group the request was escalated to; an escalation reaches that
group. Each is about one group of suspensions (the calls one assistant message made
together), named by a key that is the same for every recipient.
"""

from dataclasses import dataclass
from typing import Any

from django.contrib.auth import get_user_model
from django.contrib.auth.models import Permission
from django.db.models import Q, QuerySet

from agents.models import Event
from notify.models import EmailOptIn

# What a person needs for a notice to be of use: to open the thread page the link leads to,
# and to decide there.
NEEDED = (("agents", "view_thread"), ("agents", "decide_suspension"))
OPTED_IN, IN_GROUP = "opted_in", "in_group"
KINDS = {
    Event.Type.AGENT_SUSPENDED: "request",
    Event.Type.SUSPENSION_REMINDER: "reminder",
    Event.Type.SUSPENSION_ESCALATED: "escalation",
}


def deciders(addressed: bool = True) -> QuerySet:
    """Active people who hold every NEEDED permission (through a group or their own;
    superusers hold all); with `addressed`, only those with an email address."""
    users = get_user_model().objects.filter(is_active=True)
    if addressed:
        users = users.exclude(email="")
    for label, codename in NEEDED:
        perm = Permission.objects.filter(content_type__app_label=label, codename=codename).first()
        holders = users.filter(
            Q(is_superuser=True) | Q(groups__permissions=perm) | Q(user_permissions=perm)
        )
        users = users.filter(pk__in=holders.values("pk"))
    return users


def opted_in(agent_name: str, addressed: bool = True) -> QuerySet:
    """Deciders who asked to hear of this agent's requests, or every agent's."""
    chosen = EmailOptIn.objects.filter(Q(agent__isnull=True) | Q(agent__name=agent_name))
    return deciders(addressed).filter(pk__in=chosen.values("user_id"))


def in_group(name: str, addressed: bool = True) -> QuerySet:
    return deciders(addressed).filter(groups__name=name)


def anyone_opted_in() -> bool:
    """Whether a new request can reach anyone: with nobody opted in, a channel need not read
    AGENT_SUSPENDED events at all (most gateways; each read costs several queries)."""
    return EmailOptIn.objects.exists()


@dataclass(frozen=True)
class Route:
    """Whom one event's notice reaches: `key` names what it is about, the same for every
    recipient ("request:<group>", "reminder:<group>:<n>", "escalation:<group>:<group
    name>"); `audiences` the people, each with why, in the order a person's first reason
    counts."""

    key: str
    kind: str
    audiences: tuple[tuple[str, QuerySet], ...]

    def people(self) -> list[tuple[Any, str]]:
        """Each person once, with their first reason, by audience then id."""
        seen: dict[int, tuple[Any, str]] = {}
        for why, people in self.audiences:
            for user in people.order_by("pk"):
                seen.setdefault(user.pk, (user, why))
        return list(seen.values())


def route(event: Event, addressed: bool = True) -> Route:
    """The route of an AGENT_SUSPENDED, SUSPENSION_REMINDER or SUSPENSION_ESCALATED event
    (KINDS); `addressed` as for `deciders`."""
    s = event.suspension
    kind = KINDS[Event.Type(event.type)]
    audiences: list[tuple[str, QuerySet]] = []
    if kind == "request":
        key = f"request:{s.group}"
        audiences.append((OPTED_IN, opted_in(s.agent_name, addressed)))
    elif kind == "reminder":
        key = f"reminder:{s.group}:{event.payload.get('reminder')}"
        # The escalation group is told that it is theirs.
        if s.escalated_at is not None and s.escalate_to:
            audiences.append((IN_GROUP, in_group(s.escalate_to, addressed)))
        audiences.append((OPTED_IN, opted_in(s.agent_name, addressed)))
    else:
        key = f"escalation:{s.group}:{s.escalate_to}"
        audiences.append((IN_GROUP, in_group(s.escalate_to, addressed)))
    return Route(key, kind, tuple(audiences))
