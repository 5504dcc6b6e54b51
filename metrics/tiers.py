"""The tiers of review measured from the rows: how many requests each tier decided, and the
share that reached a person; and how often a reviewing model in shadow mode agreed with the
people who decided.

A request's tier (agents.tiers) is kept on its suspension when it is decided, so both are one
aggregate over suspensions decided in a window (the metrics_suspension_decided_idx index):
no event is read. A request *reached a person* when it waited in the reviewers' inbox until a
person decided it or its deadline did (tiers `person` and `deadline`); the tiers before them
(rule, grant, history rule, model) settled it with nobody asked.
"""

from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from django.db.models import Count, QuerySet
from django.db.models.fields.json import KT
from prometheus_client.core import CounterMetricFamily, Metric

from agents.models import Suspension
from agents.tiers import ORDER, Tier

S = Suspension.Status
REACHED_PERSON = (Tier.PERSON, Tier.DEADLINE)
# What a reviewing model may recommend (agents.reviewing); a review that failed recommends
# nothing and escalates, so it is counted as an escalation.
RECOMMENDATIONS = ("approve", "reject", "escalate")
# What the person then decided.
DECISIONS = ("approved", "rejected")
# Every row, for the counters of /metrics.
EPOCH, FAR = datetime(1970, 1, 1, tzinfo=UTC), datetime(9999, 1, 1, tzinfo=UTC)


def percent(part: int, whole: int) -> float | None:
    return round(100 * part / whole, 1) if whole else None


@dataclass
class TierRow:
    """The requests of one agent (or of all, `agent` None) decided in a window, by tier."""

    agent: str | None
    decided: dict[str, int] = field(default_factory=lambda: dict.fromkeys(ORDER, 0))

    @property
    def total(self) -> int:
        return sum(self.decided.values())

    @property
    def reached_person(self) -> int:
        return sum(self.decided[tier] for tier in REACHED_PERSON)

    @property
    def person_share(self) -> float | None:
        """The percentage of them that reached a person, one decimal; None when none."""
        return percent(self.reached_person, self.total)

    def as_json(self) -> dict[str, Any]:
        return {
            **({"agent": self.agent} if self.agent is not None else {}),
            "decided": dict(self.decided),
            "total": self.total,
            "reached_person": self.reached_person,
            "person_share": self.person_share,
        }


def decided_between(since: datetime, until: datetime) -> QuerySet[Suspension]:
    """Suspensions decided in [since, until) by some tier (a cancelled one has none)."""
    return Suspension.objects.filter(decided_at__gte=since, decided_at__lt=until).exclude(tier="")


def by_tier(since: datetime, until: datetime) -> tuple[TierRow, list[TierRow]]:
    """All agents' requests decided in [since, until) by tier, and each agent's, by name."""
    total = TierRow(None)
    agents: dict[str, TierRow] = {}
    rows = decided_between(since, until).values_list("agent_name", "tier")
    for agent, tier, n in rows.annotate(n=Count("pk")).order_by():
        if tier not in total.decided:
            continue  # a tier this version does not know (a newer process wrote it)
        total.decided[tier] += n
        agents.setdefault(agent, TierRow(agent)).decided[tier] += n
    return total, [agents[name] for name in sorted(agents)]


@dataclass
class Agreement:
    """A reviewing model's recommendations in shadow mode against what people decided, for
    one agent's tool: `counts[recommendation][decision]`."""

    agent: str
    tool: str
    counts: dict[str, dict[str, int]] = field(
        default_factory=lambda: {r: dict.fromkeys(DECISIONS, 0) for r in RECOMMENDATIONS}
    )

    @property
    def compared(self) -> int:
        """The requests it recommended approving or rejecting (an escalation takes no side)."""
        return sum(sum(self.counts[r].values()) for r in ("approve", "reject"))

    @property
    def agreed(self) -> int:
        return self.counts["approve"]["approved"] + self.counts["reject"]["rejected"]

    @property
    def agreement(self) -> float | None:
        """The percentage of `compared` where the person decided as the model recommended."""
        return percent(self.agreed, self.compared)

    @property
    def approvals_people_rejected(self) -> int:
        """What would have gone wrong had the model decided: approvals people refused."""
        return self.counts["approve"]["rejected"]

    def as_json(self) -> dict[str, Any]:
        return {
            "agent": self.agent,
            "tool": self.tool,
            "counts": {r: dict(d) for r, d in self.counts.items()},
            "compared": self.compared,
            "agreed": self.agreed,
            "agreement": self.agreement,
            "approvals_people_rejected": self.approvals_people_rejected,
        }


def shadow_agreement(since: datetime, until: datetime) -> list[Agreement]:
    """Per agent and tool, the confusion table of a shadow-mode model's recommendation (its
    `review`, agents.reviewing) against the approval or rejection a person then made, over
    the confirmations people decided in [since, until)."""
    rows = (
        decided_between(since, until)
        .filter(
            tier=Tier.PERSON,
            kind=Suspension.Kind.CONFIRMATION,
            status__in=[S.APPROVED, S.REJECTED],
            review__mode="shadow",
        )
        .annotate(recommendation=KT("review__recommendation"))
        .values_list("agent_name", "tool_name", "recommendation", "status")
        .annotate(n=Count("pk"))
        .order_by()
    )
    found: dict[tuple[str, str], Agreement] = {}
    for agent, tool, recommendation, status, n in rows:
        said = recommendation if recommendation in RECOMMENDATIONS else "escalate"
        found.setdefault((agent, tool), Agreement(agent, tool)).counts[said][status] += n
    return [found[key] for key in sorted(found)]


def families() -> list[Metric]:
    """The Prometheus families of the tiers (metrics.collector), over every row: counters,
    so a rate over any window is the scraper's (the share that reached a person is
    `sum(rate(..{tier=~"person|deadline"}[1h])) / sum(rate(..[1h]))`)."""
    decided = CounterMetricFamily(
        "gateway_decisions_by_tier",
        "Suspensions decided, by the tier of review that decided them: rule, grant, history "
        "(a rule over the run's history), model (a reviewing model), person, deadline",
        labels=["agent", "tier"],
    )
    rows = Suspension.objects.exclude(tier="").values_list("agent_name", "tier")
    for agent, tier, n in rows.annotate(n=Count("pk")).order_by("agent_name", "tier"):
        decided.add_metric([agent, tier], n)
    shadow = CounterMetricFamily(
        "gateway_shadow_reviews",
        "Confirmations a person decided after a reviewing model in shadow mode recommended: "
        "by its recommendation (approve, reject, escalate) and the person's decision "
        "(approved, rejected)",
        labels=["agent", "tool", "recommendation", "decision"],
    )
    for row in shadow_agreement(EPOCH, FAR):
        for said, decisions in row.counts.items():
            for decision, n in decisions.items():
                if n:
                    shadow.add_metric([row.agent, row.tool, said, decision], n)
    return [decided, shadow]
