"""A policy's `review:` setting, checked where it is declared (agents.rules.check_keys).

agents.rules calls `check_review` and hands it its own rule checker for a scripted answer's
`when`: this module sits below agents.rules and imports nothing of it.
"""

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any


class ReviewError(ValueError):
    """A review setting that cannot be used; agents.rules words it as a PolicyError."""


RuleCheck = Callable[[Any, str], dict[str, Any]]

SCRIPTED = "scripted"
MODES = ("shadow", "decide")
VERDICTS = ("approve", "reject")  # what `may` lists: the decisions the model may take itself
DECISIONS = ("approve", "reject", "escalate")  # what the model may answer
KEYS = ("model", "mode", "may", "timeout", "per_minute", "irreversible", "script")
MAX_TIMEOUT = 60  # under the soft time limit of its task (DELIVERY_TASK_SOFT_TIME_LIMIT)
MAX_PER_MINUTE = 10_000
MAX_SCRIPT = 50
DEFAULTS: dict[str, Any] = {
    "mode": "shadow",
    "may": list(VERDICTS),
    "timeout": 10,
    "per_minute": 30,
    "irreversible": False,
    "script": [],
}


@dataclass(frozen=True)
class Setting:
    """One review setting as it is kept with a request (Suspension.policy["review"])."""

    model: str
    mode: str
    may: tuple[str, ...]
    timeout: int
    per_minute: int
    irreversible: bool
    script: tuple[dict[str, Any], ...]

    @classmethod
    def of(cls, kept: dict[str, Any]) -> "Setting":
        found = {**DEFAULTS, **kept}
        return cls(
            model=str(found["model"]),
            mode=str(found["mode"]),
            may=tuple(found["may"]),
            timeout=int(found["timeout"]),
            per_minute=int(found["per_minute"]),
            irreversible=bool(found["irreversible"]),
            script=tuple(found["script"]),
        )

    @property
    def decides(self) -> bool:
        return self.mode == "decide"

    def kept(self) -> dict[str, Any]:
        """The setting in full, as the request keeps it and its digest covers it."""
        return {
            "model": self.model,
            "mode": self.mode,
            "may": list(self.may),
            "timeout": self.timeout,
            "per_minute": self.per_minute,
            "irreversible": self.irreversible,
            "script": list(self.script),
        }


def _whole(value: Any, low: int, high: int) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and low <= value <= high


def check_script(script: Any, where: str, check_rule: RuleCheck) -> list[dict[str, Any]]:
    """A scripted reviewer's answers: the first entry whose `when` (a rule on the arguments,
    as auto_approve writes one) holds, or that has none, is the answer; `error` fails the
    call instead, as a model that could not be reached."""
    if not isinstance(script, list) or len(script) > MAX_SCRIPT:
        raise ReviewError(f"{where}: a list of at most {MAX_SCRIPT} answers")
    found = []
    for i, entry in enumerate(script):
        at = f"{where}[{i}]"
        if not isinstance(entry, dict) or not set(entry) <= {"when", "decision", "reason", "error"}:
            raise ReviewError(f"{at}: an answer is {{when?, decision, reason}} or {{error}}")
        answer: dict[str, Any] = {}
        if "when" in entry:
            answer["when"] = check_rule(entry["when"], f"{at}.when")
        if "error" in entry:
            if not isinstance(entry["error"], str) or "decision" in entry:
                raise ReviewError(f"{at}.error: the words of the failure, without a decision")
            answer["error"] = entry["error"]
        else:
            if entry.get("decision") not in DECISIONS:
                raise ReviewError(f"{at}.decision: one of {', '.join(DECISIONS)}")
            answer["decision"] = entry["decision"]
            answer["reason"] = str(entry.get("reason") or "")
        found.append(answer)
    return found


def check_review(review: Any, where: str, check_rule: RuleCheck) -> dict[str, Any]:
    """A `review:` setting as stored, its defaults filled in; raises ReviewError (or what
    `check_rule` raises) naming the key."""
    if not isinstance(review, dict):
        raise ReviewError(f"{where}: a mapping of {', '.join(KEYS)}")
    unknown = sorted(set(review) - set(KEYS))
    if unknown:
        raise ReviewError(f"{where}: unknown key(s) {unknown}; the keys are {', '.join(KEYS)}")
    found = {**DEFAULTS, **review}
    model = found.get("model")
    if not isinstance(model, str) or not model.strip():
        raise ReviewError(f"{where}.model: a Claude model id, or {SCRIPTED!r}")
    if found["mode"] not in MODES:
        raise ReviewError(f"{where}.mode: one of {', '.join(MODES)}")
    may = found["may"]
    if not isinstance(may, list) or not all(v in VERDICTS for v in may):
        raise ReviewError(f"{where}.may: a list of {' and '.join(VERDICTS)}")
    if not _whole(found["timeout"], 1, MAX_TIMEOUT):
        raise ReviewError(f"{where}.timeout: whole seconds from 1 to {MAX_TIMEOUT}")
    if not _whole(found["per_minute"], 1, MAX_PER_MINUTE):
        raise ReviewError(f"{where}.per_minute: a whole number from 1 to {MAX_PER_MINUTE}")
    if not isinstance(found["irreversible"], bool):
        raise ReviewError(f"{where}.irreversible: true or false")
    script = check_script(found["script"], f"{where}.script", check_rule)
    if model == SCRIPTED and not script:
        raise ReviewError(f"{where}.script: a scripted reviewer needs its answers")
    if model != SCRIPTED and script:
        raise ReviewError(f"{where}.script: only a scripted reviewer has a script")
    return Setting(
        model=model.strip(),
        mode=found["mode"],
        may=tuple(dict.fromkeys(may)),
        timeout=found["timeout"],
        per_minute=found["per_minute"],
        irreversible=found["irreversible"],
        script=tuple(script),
    ).kept()
