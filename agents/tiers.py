"""The tiers of review: who (or what) settled a request, from the cheapest to a person.

A request a rule on its arguments settles is decided by `rule`; one a standing grant covers,
by `grant`; a rule over the run's history (a count or a sum over a window, agents.history),
by `history`; a reviewing model (agents.reviewing), by `model`; a reviewer, by `person`; the
clock at the deadline, by `deadline`. The tier is kept on the suspension (`Suspension.tier`)
when it is decided, so the figures (metrics, /insights/) count it without reading events.
"""

from enum import StrEnum


class Tier(StrEnum):
    RULE = "rule"
    GRANT = "grant"
    HISTORY = "history"
    MODEL = "model"
    PERSON = "person"
    DEADLINE = "deadline"


# Cheapest first: the order the figures list them in.
ORDER = tuple(Tier)
