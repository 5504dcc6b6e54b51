"""The inbox's triage for a long queue: the filters that matter, their counts, and identical
requests grouped into one row.

Filters (each a query parameter, all optional, combined): `agent`, `tool`, `kind`, `risk` (the
tool's stake, agents.runtime.tools.RISKS), `within` (a deadline within that many seconds: one
of WITHIN), `claim` (`mine`, `unclaimed`, `others`: presence's claims that hold now).

A group is the requests that are the same call: the same agent, tool and arguments (their
`args_hash`). Hundreds of identical requests from one runaway agent are one row with a count,
which a reviewer selects whole (static/js/select.js) instead of reading each.
"""

from collections import Counter, OrderedDict
from dataclasses import dataclass, field
from datetime import timedelta
from typing import Any

from django.db.models import Count, F, Q, QuerySet
from django.http import HttpRequest
from django.utils import timezone

from agents.models import AgentDefinition, Suspension
from agents.runtime.tools import RISKS
from agents.runtime.tools import registry as tool_registry
from presence import actions as presence

# The inbox's orders (static/js/inbox.js places a card that arrives live by the same keys, its
# data-expires and data-created):
# most urgent first, the earliest deadline first (served by suspension_overdue_idx), those
# without a deadline last, then oldest first; or by age alone (suspension_pending_idx).
INBOX_ORDERS = {
    "urgent": (F("expires_at").asc(nulls_last=True), "created_at", "id"),
    "oldest": ("created_at", "id"),
    "newest": ("-created_at", "-id"),
}
INBOX_ORDER_LABELS = {
    "urgent": "Most urgent first",
    "oldest": "Oldest first",
    "newest": "Newest first",
}


# The deadlines a reviewer may narrow to, in seconds, and their words.
WITHIN = {900: "15 minutes", 3600: "1 hour", 14400: "4 hours", 86400: "1 day"}
CLAIMS = {"mine": "Claimed by me", "unclaimed": "Unclaimed", "others": "Claimed by others"}
SIMPLE_FILTERS = (("agent", "agent_name"), ("tool", "tool_name"), ("kind", "kind"))

# Groups are formed from at most this many pending requests, read in the inbox's order (ids,
# agent, tool and hash only: about 2 ms on PostgreSQL); a queue longer than that is grouped
# over its first TRIAGE_SCAN, and the groups shown are then counted whole by their hashes
# (suspension_triage_idx).
TRIAGE_SCAN = 2000
# The most ids a group row carries for selecting it whole (a 36-byte id each).
MEMBERS_LIMIT = 500
# The counts beside the filters are read while at most this many wait: counting more would
# read every pending row on each page load, slower than the page it counts for
# (bench/README.md), and a reviewer facing thousands filters rather than counts.
COUNTED_LIMIT = 1000


def risk_of(s: Suspension) -> str:
    """A request's risk as its tool declared it when it was made ("normal" before risks)."""
    return str((s.presentation or {}).get("risk") or "normal")


def _risk_q(risk: str) -> Q:
    if risk == "normal":
        # Made before requests kept their risk: normal.
        return Q(presentation__risk="normal") | ~Q(presentation__has_key="risk")
    return Q(presentation__risk=risk)


def _claim_q(claim: str, user_id: int) -> Q:
    held = presence.holding()
    if claim == "mine":
        return Q(pk__in=held.filter(user_id=user_id).values("suspension_id"))
    if claim == "others":
        return Q(pk__in=held.exclude(user_id=user_id).values("suspension_id"))
    return ~Q(pk__in=held.values("suspension_id"))


def chosen_filters(request: HttpRequest) -> dict[str, str]:
    """The reader's filters, those with a known value only (an unknown one filters nothing)."""
    chosen = {}
    for key, _ in SIMPLE_FILTERS:
        value = request.GET.get(key, "")
        if value:
            chosen[key] = value
    if request.GET.get("risk") in RISKS:
        chosen["risk"] = request.GET["risk"]
    if request.GET.get("within", "").isdigit() and int(request.GET["within"]) in WITHIN:
        chosen["within"] = request.GET["within"]
    if request.GET.get("claim") in CLAIMS:
        chosen["claim"] = request.GET["claim"]
    return chosen


def pending_rows(request: HttpRequest) -> tuple[QuerySet[Suspension], dict[str, str]]:
    """What waits for a decision under the reader's filters. Ignored ones stay pending until
    their deadline, off the inbox (agents.decisions.ignore)."""
    rows = Suspension.objects.filter(status=Suspension.Status.PENDING, ignored_at__isnull=True)
    chosen = chosen_filters(request)
    for key, column in SIMPLE_FILTERS:
        if key in chosen:
            rows = rows.filter(**{column: chosen[key]})
    if "risk" in chosen:
        rows = rows.filter(_risk_q(chosen["risk"]))
    if "within" in chosen:
        due = timezone.now() + timedelta(seconds=int(chosen["within"]))
        rows = rows.filter(expires_at__lte=due)
    if "claim" in chosen:
        rows = rows.filter(_claim_q(chosen["claim"], request.user.pk))
    return rows, chosen


@dataclass
class Group:
    """Requests that are the same call: `first` in the inbox's order stands for them."""

    key: str
    first: str
    size: int = 0
    members: list[str] = field(default_factory=list)


def key_of(agent: str, tool: str, args_hash: str, pk: Any) -> str:
    # A request made before hashes were kept is a group of its own.
    return f"{agent}/{tool}/{args_hash}" if args_hash else f"id/{pk}"


def groups(ordered: QuerySet[Suspension], limit: int, together: bool = True) -> list[Group]:
    """The first `limit` groups of `ordered` (pending rows in the inbox's order), each with its
    size under the same filters and the ids of its first MEMBERS_LIMIT members; each request a
    group of its own unless `together`."""
    if not together:
        return [
            Group(f"id/{pk}", str(pk), 1, [str(pk)])
            for pk in ordered.values_list("id", flat=True)[:limit]
        ]
    columns = ("id", "agent_name", "tool_name", "args_hash")
    scan = list(ordered.values_list(*columns)[: TRIAGE_SCAN + 1])
    truncated = len(scan) > TRIAGE_SCAN
    found: OrderedDict[str, Group] = OrderedDict()
    for pk, agent, tool, args_hash in scan[:TRIAGE_SCAN]:
        key = key_of(agent, tool, args_hash, pk)
        group = found.get(key)
        if group is None:
            if len(found) == limit:
                continue  # a later request of a group already found may still come
            group = found[key] = Group(key, str(pk))
        group.size += 1
        if len(group.members) < MEMBERS_LIMIT:
            group.members.append(str(pk))
    shown = list(found.values())
    if truncated:
        # Members past the scan: each group shown is counted whole, by its hash.
        hashes = {g.key.rsplit("/", 1)[1] for g in shown if not g.key.startswith("id/")}
        sizes = {
            key_of(r["agent_name"], r["tool_name"], r["args_hash"], None): r["n"]
            for r in ordered.order_by()
            .filter(args_hash__in=hashes)
            .values("agent_name", "tool_name", "args_hash")
            .annotate(n=Count("id"))
        }
        for g in shown:
            g.size = max(g.size, sizes.get(g.key, 0))
    return shown


def group_of(s: Suspension, ordered: QuerySet[Suspension], together: bool = True) -> Group:
    """The group `s` belongs to under the same filters (itself alone when none matches, or
    unless `together`)."""
    key = key_of(s.agent_name, s.tool_name, s.args_hash, s.pk)
    if not s.args_hash or not together:
        return Group(key, str(s.pk), 1, [str(s.pk)])
    same = ordered.filter(agent_name=s.agent_name, tool_name=s.tool_name, args_hash=s.args_hash)
    members = [str(pk) for pk in same.values_list("id", flat=True)[:MEMBERS_LIMIT]]
    size = len(members) if len(members) < MEMBERS_LIMIT else same.count()
    if not members:
        return Group(key, str(s.pk), 1, [str(s.pk)])
    return Group(key, members[0], size, members)


def inbox_order(request: HttpRequest) -> str:
    """The order the reader chose (`?order=`), remembered in their session; urgent by default."""
    chosen = request.GET.get("order")
    if chosen in INBOX_ORDERS:
        if request.session.get("inbox_order") != chosen:
            request.session["inbox_order"] = chosen
        return chosen
    remembered = request.session.get("inbox_order")
    return remembered if remembered in INBOX_ORDERS else "urgent"


# Rows: identical requests together (the default), or each request a row of its own.
GROUPINGS = {"same": "Group identical", "none": "One per request"}


def grouping(request: HttpRequest) -> bool:
    """Does the reader want identical requests together (`?group=same|none`, remembered in
    their session like the order)? Yes by default."""
    chosen = request.GET.get("group")
    if chosen in GROUPINGS:
        if request.session.get("inbox_group") != chosen:
            request.session["inbox_group"] = chosen
        return chosen == "same"
    return request.session.get("inbox_group") != "none"


def mark(c: dict[str, Any], group: Group) -> None:
    """A card as its group's row: how many identical requests wait, and their ids."""
    c["triage"] = group.key
    c["same"] = group.size
    c["members"] = " ".join(group.members) if group.size > 1 else ""


def next_of(s: Suspension, ordered: QuerySet[Suspension]) -> Suspension | None:
    """The first request still waiting that is the same call as `s` (under the filters)."""
    if not s.args_hash:
        return None
    same = ordered.filter(agent_name=s.agent_name, tool_name=s.tool_name, args_hash=s.args_hash)
    return same.first()


def pending_counts(user_id: int) -> dict[str, dict[Any, int]] | None:
    """How many requests wait, per agent, tool, risk, deadline and claim (for this reader);
    None when more than COUNTED_LIMIT do (read through suspension_pending_idx)."""
    rows = list(
        Suspension.objects.filter(status=Suspension.Status.PENDING, ignored_at__isnull=True)
        .order_by("created_at", "id")
        .values_list("id", "agent_name", "tool_name", "presentation__risk", "expires_at")[
            : COUNTED_LIMIT + 1
        ]
    )
    if len(rows) > COUNTED_LIMIT:
        return None
    now = timezone.now()
    claims = dict(presence.holding().values_list("suspension_id", "user_id"))
    within: Counter[str] = Counter()
    claimed: Counter[str] = Counter()
    for pk, _, _, _, expires_at in rows:
        for seconds in WITHIN:
            if expires_at is not None and expires_at <= now + timedelta(seconds=seconds):
                within[str(seconds)] += 1
        holder = claims.get(pk)
        claimed["unclaimed" if holder is None else "mine" if holder == user_id else "others"] += 1
    return {
        "agents": dict(Counter(row[1] for row in rows)),
        "tools": dict(Counter(row[2] for row in rows)),
        "risks": dict(Counter(row[3] or "normal" for row in rows)),
        "within": dict(within),
        "claim": dict(claimed),
    }


def filter_options(user_id: int) -> dict[str, Any]:
    """What each filter offers, each choice with how many of its requests wait now (None for
    each while too many wait to count them)."""
    counts = pending_counts(user_id)
    known: dict[str, dict[Any, int]] = counts or {}

    def counted(kind: str, choices: Any) -> list[tuple[Any, Any, int | None]]:
        per = known.get(kind, {})
        return [(value, label, per.get(value, 0) if counts else None) for value, label in choices]

    agents = sorted(
        set(AgentDefinition.objects.values_list("name", flat=True)) | known.get("agents", {}).keys()
    )
    tools = sorted(set(tool_registry.tools) | known.get("tools", {}).keys())
    return {
        "agents": counted("agents", [(a, a) for a in agents]),
        "tools": counted("tools", [(t, t) for t in tools]),
        "risks": counted("risks", [(r, r) for r in reversed(RISKS)]),
        "within": counted("within", [(str(s), w) for s, w in WITHIN.items()]),
        "claims": counted("claim", CLAIMS.items()),
    }
